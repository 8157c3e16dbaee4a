package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
)

func TestOpenAPIJSON(t *testing.T) {
	t.Parallel()
	b, err := OpenAPIJSON([]byte("openapi: 3.1.0\npaths:\n  /x:\n    get:\n      responses:\n        '200': {description: ok}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.OpenAPI != "3.1.0" || v.Paths["/x"]["get"]["responses"] == nil {
		t.Fatalf("%s (%v)", b, err)
	}
	for name, doc := range map[string]string{
		"not yaml":       "openapi: [",
		"not a mapping":  "- a\n- b\n",
		"unquoted codes": "responses:\n  200: {description: ok}\n",
	} {
		if _, err := OpenAPIJSON([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzOpenAPIJSON: any input gives JSON or an error, never a panic.
func FuzzOpenAPIJSON(f *testing.F) {
	f.Add([]byte("openapi: 3.1.0\ninfo: {title: t, version: v}\n"))
	f.Add([]byte("a: {b: [1, 2.5, true, null, '200']}\n"))
	f.Add([]byte("200: x\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		b, err := OpenAPIJSON(doc)
		if err == nil && !json.Valid(b) {
			t.Fatalf("invalid JSON %s", b)
		}
	})
}

// TestServeOpenAPIConvertsOnFirstRequest: the document is turned into JSON
// when first asked for, not when the handler is made (at start, in every
// process of the binary: the agent carries the core's document too), and
// once.
func TestServeOpenAPIConvertsOnFirstRequest(t *testing.T) {
	t.Parallel()
	doc := []byte("openapi: 3.1.0\npaths: {}\n")
	conversions := 0
	h := serveOpenAPI(doc, func(d []byte) ([]byte, error) { conversions++; return OpenAPIJSON(d) })
	if conversions != 0 {
		t.Fatalf("converted %d time(s) before any request", conversions)
	}
	e := echo.New()
	e.GET("/api/v1/openapi.json", h)
	for range 2 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
		if rec.Code != http.StatusOK || rec.Body.String() != `{"openapi":"3.1.0","paths":{}}` {
			t.Fatalf("answer %d %s", rec.Code, rec.Body)
		}
	}
	if conversions != 1 {
		t.Fatalf("converted %d times for two requests, want 1", conversions)
	}

	rec := httptest.NewRecorder()
	bad := echo.New()
	bad.GET("/x", ServeOpenAPI([]byte("- not\n- a mapping\n")))
	bad.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("a broken document answered %d, want 500", rec.Code)
	}
}
