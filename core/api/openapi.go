package api

import (
	_ "embed"

	"github.com/musterhq/muster/shared/apiserver"
)

// OpenAPIDocument is the OpenAPI 3.1 document of this API, as kept in the
// repository (YAML). GET /api/v1/openapi.json serves it as JSON, without a
// token: it tells nothing that the source does not, and client generators
// fetch it. The API tests check every exchange against it.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

// openAPIJSON is the served form, made once.
var openAPIJSON = func() []byte {
	b, err := apiserver.OpenAPIJSON(OpenAPIDocument)
	if err != nil {
		panic("core/api/openapi.yaml: " + err.Error()) // a build defect, caught by every test
	}
	return b
}()
