package api

import (
	_ "embed"

	"github.com/musterhq/muster/shared/apiserver"
)

// OpenAPIDocument is the OpenAPI 3.1 document of this API, as kept in the
// repository (YAML), served as JSON at GET /api/v1/openapi.json on both
// listeners. The API tests check their exchanges against it.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

// openAPIJSON is the served form, made once.
var openAPIJSON = func() []byte {
	b, err := apiserver.OpenAPIJSON(OpenAPIDocument)
	if err != nil {
		panic("agent/api/openapi.yaml: " + err.Error()) // a build defect, caught by every test
	}
	return b
}()
