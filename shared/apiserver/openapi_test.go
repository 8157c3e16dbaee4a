package apiserver

import (
	"encoding/json"
	"testing"
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
