package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Errors the API raises itself, matched with errors.Is; ops.Describe maps
// them with every error of the operations.
var (
	ErrTooLarge = ops.ErrTooLarge
	ErrTooMany  = ops.ErrTooMany
	ErrBusy     = ops.ErrBusy
)

func badRequest(format string, args ...any) error { return ops.BadRequest(format, args...) }

// statusOf returns the HTTP status the API answers for err.
func statusOf(err error) int { return describe(err).Status }

// describe maps an error to what the API answers: the operations' Problem,
// or, for what echo itself refused (an unknown route, a wrong method), its
// status with a terse text.
func describe(err error) ops.Problem {
	p := ops.Describe(err)
	if ops.Known(err) {
		return p
	}
	code := echo.StatusCode(err)
	if code == 0 {
		return p
	}
	p.Status, p.Message, p.Internal = code, strings.ToLower(http.StatusText(code)), false
	switch code {
	case http.StatusNotFound:
		p.Code = wire.CodeNotFound
	case http.StatusMethodNotAllowed, http.StatusBadRequest:
		p.Code = wire.CodeBadRequest
	case http.StatusRequestEntityTooLarge:
		p.Code = wire.CodeTooLarge
	case http.StatusUnauthorized:
		p.Code = wire.CodeUnauthorized
	case http.StatusForbidden:
		p.Code = wire.CodeForbidden
	case http.StatusServiceUnavailable:
		p.Code = wire.CodeUnavailable
	default:
		p.Status, p.Code, p.Message, p.Internal = http.StatusInternalServerError, wire.CodeInternal, "internal error", true
	}
	return p
}

// handleError is the one echo error handler: every error answer is the
// envelope of shared/wire.
func (s *Server) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	p := describe(err)
	switch {
	case p.Internal:
		// The cause goes to the log, not to the caller.
		s.log.Error("api request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	case errors.Is(err, store.ErrUnavailable):
		// Nothing was written: the caller may try again.
		s.log.Warn("api request failed: database unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	case p.Status == http.StatusUnauthorized:
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="muster"`)
	}
	body := wire.ErrorBody{Error: wire.ErrorDetail{Code: p.Code, Message: p.Message, Field: p.Field, State: p.State,
		Matches: p.Matches, AllowedRoles: p.Allowed}}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(p.Status)
	} else {
		err = c.JSON(p.Status, body)
	}
	if err != nil {
		s.log.Debug("write error answer", "err", err)
	}
}
