package api

import _ "embed"

// OpenAPIDocument is the OpenAPI 3.1 document of this API, as kept in the
// repository (YAML). GET /api/v1/openapi.json serves it as JSON, without a
// token: it tells nothing that the source does not, and client generators
// fetch it. The API tests check every exchange against it.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte
