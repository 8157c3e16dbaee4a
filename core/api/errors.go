package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Errors of the API, matched with errors.Is. The error handler maps them, and
// those of core/store, core/auth and shared/action, to a status and a code.
var (
	ErrBadRequest    = errors.New("bad request")
	ErrForbidden     = actions.ErrForbidden
	ErrWrongState    = actions.ErrWrongState
	ErrAmbiguous     = errors.New("ambiguous id prefix")
	ErrUnprocessable = actions.ErrUnprocessable
	ErrTooLarge      = errors.New("request body too large")
	ErrTooMany       = errors.New("too many requests")
	ErrBusy          = errors.New("server busy")
	ErrConflict      = errors.New("conflict")
)

// ambiguousError is a prefix that names more than one action.
type ambiguousError struct {
	prefix  string
	matches []string
}

func (e *ambiguousError) Error() string {
	return fmt.Sprintf("id prefix %q matches %d actions", e.prefix, len(e.matches))
}
func (e *ambiguousError) Unwrap() error { return ErrAmbiguous }

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

// Status returns the HTTP status the API answers for err, so that other
// front ends (the web UI) report an error of an action change as the API
// does.
func Status(err error) int {
	status, _ := classify(err)
	return status
}

// classify maps an error to its status and code.
func classify(err error) (int, string) {
	if status, code, ok := runError(err); ok {
		return status, code
	}
	if status, code, ok := playbookError(err); ok {
		return status, code
	}
	if status, code, ok := enrollError(err); ok {
		return status, code
	}
	if status, code, ok := scheduleError(err); ok {
		return status, code
	}
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, action.ErrInvalid), errors.Is(err, auth.ErrInvalid),
		errors.Is(err, jsonbody.ErrInvalid), errors.Is(err, store.ErrInvalidQuery):
		return http.StatusBadRequest, wire.CodeBadRequest
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized, wire.CodeUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, wire.CodeForbidden
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, wire.CodeNotFound
	case errors.Is(err, ErrWrongState), errors.Is(err, ErrAmbiguous), errors.Is(err, ErrConflict), errors.Is(err, nodes.ErrConfigured),
		errors.Is(err, store.ErrExists), errors.Is(err, action.ErrTransition):
		return http.StatusConflict, wire.CodeConflict
	case errors.Is(err, ErrTooLarge), errors.Is(err, jsonbody.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, wire.CodeTooLarge
	case errors.Is(err, ErrUnprocessable):
		return http.StatusUnprocessableEntity, wire.CodeUnprocessable
	case errors.Is(err, ErrTooMany):
		return http.StatusTooManyRequests, wire.CodeTooMany
	case errors.Is(err, ErrBusy), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, wire.CodeUnavailable
	case errors.Is(err, apiserver.ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, wire.CodeUnsupportedMediaType
	}
	switch code := echo.StatusCode(err); code {
	case http.StatusNotFound:
		return code, wire.CodeNotFound
	case http.StatusMethodNotAllowed:
		return code, wire.CodeBadRequest
	case http.StatusRequestEntityTooLarge:
		return code, wire.CodeTooLarge
	case http.StatusBadRequest:
		return code, wire.CodeBadRequest
	case http.StatusUnauthorized:
		return code, wire.CodeUnauthorized
	case http.StatusForbidden:
		return code, wire.CodeForbidden
	case http.StatusServiceUnavailable:
		return code, wire.CodeUnavailable
	}
	return http.StatusInternalServerError, wire.CodeInternal
}

// handleError is the one echo error handler: every error answer is the
// envelope of shared/wire.
func (s *Server) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	status, code := classify(err)
	body := wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: err.Error(), Field: errorField(err)}}
	switch status {
	case http.StatusInternalServerError:
		// The cause goes to the log, not to the caller.
		s.log.Error("api request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		body.Error.Message = "internal error"
	case http.StatusServiceUnavailable:
		if errors.Is(err, store.ErrUnavailable) {
			// Nothing was written: the caller may try again.
			s.log.Warn("api request failed: database unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			body.Error.Message = "the database is unavailable; nothing was changed, try again"
		}
	case http.StatusUnauthorized:
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="muster"`)
	}
	if echo.StatusCode(err) != 0 && !isOurs(err) {
		// echo's own errors (404 route, 405, 413) carry terse texts.
		body.Error.Message = strings.ToLower(http.StatusText(status))
	}
	var se *actions.StateError
	if errors.As(err, &se) {
		body.Error.State = se.State
	}
	var ae *ambiguousError
	if errors.As(err, &ae) {
		body.Error.Matches = ae.matches
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, body)
	}
	if err != nil {
		s.log.Debug("write error answer", "err", err)
	}
}

// isOurs reports whether err carries one of this package's classifications
// (so its message is meant for the caller).
func isOurs(err error) bool {
	for _, e := range []error{ErrBadRequest, ErrForbidden, ErrWrongState, ErrAmbiguous, ErrUnprocessable,
		ErrTooLarge, ErrTooMany, ErrBusy, ErrConflict, store.ErrNotFound, store.ErrExists, store.ErrInvalidQuery, auth.ErrUnauthenticated,
		auth.ErrInvalid, action.ErrInvalid, jsonbody.ErrInvalid, jsonbody.ErrTooLarge, apiserver.ErrUnsupportedMediaType,
		runs.ErrInvalid, runs.ErrUnresolvable, runs.ErrReplan, playbook.ErrInvalid, nodes.ErrConfigured, schedule.ErrInvalid,
		enroll.ErrDisabled, enroll.ErrInvalid, enroll.ErrRefused, enroll.ErrHeld, tlsutil.ErrBadCSR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
