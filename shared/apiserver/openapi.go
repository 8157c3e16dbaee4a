package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v5"
	"go.yaml.in/yaml/v3"
)

// OpenAPIJSON turns an API's OpenAPI document, kept as YAML beside its
// handlers, into the JSON it serves. It fails on a document that is not a
// YAML mapping with string keys (response codes are quoted: '200').
func OpenAPIJSON(doc []byte) ([]byte, error) {
	var v map[string]any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	return b, nil
}

// ServeOpenAPI answers an API's OpenAPI document (YAML) as JSON, turned
// into JSON on the first request and kept. Not at start: every process of
// the binary would pay for every document it carries (the agent carries the
// core's), about 1.7 MB of allocations whose pages stay resident in an idle
// agent. A broken document answers 500 (every API test reads the document,
// so none reaches a release).
func ServeOpenAPI(doc []byte) echo.HandlerFunc {
	return serveOpenAPI(doc, OpenAPIJSON)
}

func serveOpenAPI(doc []byte, convert func([]byte) ([]byte, error)) echo.HandlerFunc {
	served := sync.OnceValues(func() ([]byte, error) { return convert(doc) })
	return func(c *echo.Context) error {
		b, err := served()
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, "application/json", b)
	}
}
