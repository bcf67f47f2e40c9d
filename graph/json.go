package graph

import (
	"encoding/json"
	"fmt"
	"io"
)

// JSON is the JSON scalar: a raw JSON value, written out as it is.
type JSON json.RawMessage

// MarshalGQL writes the value.
func (j JSON) MarshalGQL(w io.Writer) {
	if len(j) == 0 {
		io.WriteString(w, "null")
		return
	}
	w.Write(j)
}

// UnmarshalGQL accepts any input value.
func (j *JSON) UnmarshalGQL(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	*j = b
	return nil
}
