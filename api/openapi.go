package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the REST API (openapi.yaml, YAML),
// written by hand beside the types it describes; the gateway serves it as
// JSON at GET /v1/openapi.json, and the server's tests hold it true: every
// route is in it, and every answer they get matches it.
//
//go:embed openapi.yaml
var OpenAPI []byte
