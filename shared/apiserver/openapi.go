package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

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

// ServeJSON answers a fixed JSON document (the API's OpenAPI document).
func ServeJSON(doc []byte) echo.HandlerFunc {
	return func(c *echo.Context) error {
		return c.Blob(http.StatusOK, "application/json", doc)
	}
}
