package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeConfig decodes a connection's configuration strictly into v (a
// pointer to the adapter's config struct): an absent or null config is
// {}, unknown fields, wrong types and data after the object are
// *ConfigError values naming the field. channel names the channel in the
// messages, known lists the fields a caller may set, and example shows a
// valid config.
func DecodeConfig(raw json.RawMessage, v any, channel, known, example string) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &ConfigError{Field: strings.Trim(name, `"`), Msg: fmt.Sprintf("unknown field of a %s connection (known: %s)", channel, known)}
		}
		field := "config"
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			field = ute.Field
		}
		return &ConfigError{Field: field, Msg: fmt.Sprintf("the %s config must be a JSON object like %s: %v", channel, example, err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &ConfigError{Field: "config", Msg: fmt.Sprintf("the %s config has data after its JSON object", channel)}
	}
	return nil
}
