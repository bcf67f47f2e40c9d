package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/goccy/go-yaml"

	"github.com/comm-gateway/comm/api"
)

// OpenAPI returns the OpenAPI 3.1 document of the REST API (api.OpenAPI)
// as the JSON that GET /v1/openapi.json serves, converted once.
var OpenAPI = sync.OnceValues(func() ([]byte, error) {
	b, err := yaml.YAMLToJSON(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
})

// openAPI is GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	doc, err := OpenAPI()
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeRaw(w, http.StatusOK, doc)
	return nil
}
