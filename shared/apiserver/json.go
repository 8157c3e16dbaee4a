package apiserver

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/labstack/echo/v5"
)

// ErrUnsupportedMediaType is a write whose body is not declared JSON. Each
// API's error handler answers it 415 with the JSON error envelope.
var ErrUnsupportedMediaType = errors.New("unsupported media type")

// RequireJSON refuses a POST, PUT, PATCH or DELETE that carries a body
// without Content-Type: application/json (parameters such as charset
// allowed). A browser sends text/plain, form and multipart bodies to any
// origin without asking first; it never sends application/json that way,
// so this is what keeps a web page open on a node or an operator's desktop
// from queuing work (CSRF, DNS rebinding).
func RequireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		if r.ContentLength == 0 {
			return next(c)
		}
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			if ct == "" {
				ct = "none"
			}
			return fmt.Errorf("%w: a %s with a body needs Content-Type: application/json, not %.100q",
				ErrUnsupportedMediaType, r.Method, ct)
		}
		return next(c)
	}
}

// RequireJSONWrites is RequireJSON for an API every write of which declares
// JSON, a body-less one included (a cancel): a browser's cross-site form or
// fetch without a preflight can send neither, whatever its body.
func RequireJSONWrites(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			if ct == "" {
				ct = "none"
			}
			return fmt.Errorf("%w: a %s needs Content-Type: application/json, even without a body, not %.100q",
				ErrUnsupportedMediaType, r.Method, ct)
		}
		return next(c)
	}
}
