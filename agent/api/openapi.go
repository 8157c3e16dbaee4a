package api

import _ "embed"

// OpenAPIDocument is the OpenAPI 3.1 document of this API, as kept in the
// repository (YAML), served as JSON at GET /api/v1/openapi.json on both
// listeners. The API tests check their exchanges against it.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte
