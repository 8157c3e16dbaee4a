package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Errors an answer is matched with (errors.Is), whatever its wording. The
// *APIError behind them carries the status, the message and, where the
// server sent one, its record.
var (
	ErrBadRequest      = errors.New("bad request")            // 400
	ErrUnauthorized    = errors.New("unauthorized")           // 401
	ErrForbidden       = errors.New("forbidden")              // 403
	ErrNotFound        = errors.New("not found")              // 404
	ErrConflict        = errors.New("conflict")               // 409
	ErrFinal           = errors.New("already final")          // 409 to a cancel: the action has finished
	ErrGone            = errors.New("gone")                   // 410: the id was purged; it is never run
	ErrRequestTooLarge = errors.New("request too large")      // 413: the server refused the request body
	ErrRefused         = errors.New("refused")                // 422: unknown kind or bad args
	ErrTooMany         = errors.New("too many requests")      // 429
	ErrUnavailable     = errors.New("unavailable")            // 503
	ErrServer          = errors.New("server error")           // any other 5xx
	ErrUnexpected      = errors.New("unexpected HTTP status") // any other non-2xx
)

var byStatus = map[int]error{
	http.StatusBadRequest:            ErrBadRequest,
	http.StatusUnauthorized:          ErrUnauthorized,
	http.StatusForbidden:             ErrForbidden,
	http.StatusNotFound:              ErrNotFound,
	http.StatusConflict:              ErrConflict,
	http.StatusGone:                  ErrGone,
	http.StatusRequestEntityTooLarge: ErrRequestTooLarge,
	http.StatusUnprocessableEntity:   ErrRefused,
	http.StatusTooManyRequests:       ErrTooMany,
	http.StatusServiceUnavailable:    ErrUnavailable,
}

// APIError is an answer with a non-2xx status. Detail is the decoded
// envelope (its message, and the server's record for a conflict). It
// matches the sentinel of its status with errors.Is, and ErrFinal when it
// answers a cancel of a finished action.
type APIError struct {
	Status int
	Detail wire.ErrorDetail
	// Raw is the start of a body that was not the JSON error envelope (a
	// proxy's page, or Go's answer to plain HTTP on a TLS port); "" when
	// the envelope came.
	Raw   string
	final bool
}

func (e *APIError) Error() string {
	switch {
	case e.Detail.Message != "" && e.Detail.Code != "":
		return fmt.Sprintf("%s (%d %s)", e.Detail.Message, e.Status, e.Detail.Code)
	case e.Detail.Message != "":
		return fmt.Sprintf("%s (%d)", e.Detail.Message, e.Status)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// PlainHTTPToTLS reports the answer Go's TLS servers give a plain HTTP
// request: the address names the TLS port with http:// (or no scheme).
func (e *APIError) PlainHTTPToTLS() bool {
	return e.Status == http.StatusBadRequest && strings.Contains(e.Raw, "HTTP request to an HTTPS server")
}

// Is matches the sentinel of the answer's status.
func (e *APIError) Is(target error) bool {
	if target == ErrFinal {
		return e.final
	}
	if s, ok := byStatus[e.Status]; ok {
		return s == target
	}
	if e.Status >= 500 {
		return target == ErrServer
	}
	return target == ErrUnexpected
}

// Message is the server's message.
func (e *APIError) Message() string { return e.Detail.Message }

// Record is the record the server sent with the error (the agent's, for a
// conflict), or nil.
func (e *APIError) Record() *action.Action { return e.Detail.Record }

// StatusOf returns the HTTP status of err when it is an *APIError, else 0
// (a transport error: the request may not have arrived). For display and
// tests; code decides with errors.Is and the sentinels above.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Answered reports whether err is an answer of the server (an *APIError).
// Any other error (a refused connection, a timeout, a cut answer) may hide
// a request that arrived.
func Answered(err error) bool {
	var ae *APIError
	return errors.As(err, &ae)
}

// MessageOf returns the server's message of an answered error, or "".
func MessageOf(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Detail.Message
	}
	return ""
}

// decodeError reads an error answer into an *APIError.
func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{Status: resp.StatusCode}
	var env wire.ErrorBody
	if json.Unmarshal(body, &env) == nil {
		e.Detail = env.Error
	} else {
		e.Raw = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	if e.Detail.Message == "" {
		e.Detail.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
