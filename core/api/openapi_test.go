package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/musterhq/muster/shared/apicontract"
)

// TestOpenAPIDocumentServed: GET /api/v1/openapi.json answers, without a
// token, the repository's document as JSON, a valid OpenAPI 3.1 document
// with the same operations.
func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, b := e.do(http.MethodGet, "/api/v1/openapi.json", "", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.OpenAPI != "3.1.0" {
		t.Fatalf("openapi field %q (%v), want 3.1.0", head.OpenAPI, err)
	}
	served, err := apicontract.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := served.Operations(), loadContract(t).Operations(); !slices.Equal(got, want) {
		t.Fatalf("served operations %q, repository's %q", got, want)
	}
}
