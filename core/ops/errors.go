package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

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

// Errors of the operations, matched with errors.Is. Describe maps them, and
// those of the domain packages, to one Problem that every transport shows.
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

// BadRequest is an ErrBadRequest with its message.
func BadRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

// ambiguousError is an id prefix that names more than one record.
type ambiguousError struct {
	Prefix  string
	What    string // "actions", "runs"
	Matches []string
}

func (e *ambiguousError) Error() string {
	return fmt.Sprintf("id prefix %q matches %d %s", e.Prefix, len(e.Matches), e.What)
}
func (e *ambiguousError) Unwrap() error { return ErrAmbiguous }

// ForbiddenError is a caller whose roles do not grant what it asked: it
// names the roles that would.
type ForbiddenError struct {
	Caller  string
	Roles   []string
	Perm    auth.Permission
	Allowed []string
	// Doing says what was refused when it is more than Perm ("" for Perm).
	Doing string
}

func (e *ForbiddenError) Error() string {
	doing := e.Doing
	if doing == "" {
		doing = e.Perm.Verb()
	}
	if len(e.Roles) == 0 {
		// A person signed in, or a token holding its person's grants
		// alone: neither has a role of its own.
		return fmt.Sprintf("%s holds no grant that lets them %s: that takes the %s role", e.Caller, doing, orList(e.Allowed))
	}
	return fmt.Sprintf("token %s (roles %s) may not %s: that takes the %s role", e.Caller, strings.Join(e.Roles, ","), doing,
		orList(e.Allowed))
}

// orList is "a", "a or b", "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// Problem is an error as every transport shows it: the HTTP status, the
// wire code, the message meant for the caller (never an internal cause),
// and what helps them act on it.
type Problem struct {
	Status  int
	Code    string
	Message string
	// Field is the request field a 400 is about, when one is.
	Field string
	// State is the state of the record a call was refused for.
	State string
	// Matches are the ids an ambiguous prefix names.
	Matches []string
	// Allowed are the roles that may do what a 403 refused.
	Allowed []string
	// Internal is a 5xx whose cause goes to the log, not to the caller.
	Internal bool
}

// Describe maps err to the Problem every transport answers: the API's
// status and error envelope, the UI's status and message.
func Describe(err error) Problem {
	status, code := classify(err)
	p := Problem{Status: status, Code: code, Message: err.Error(), Field: errorField(err)}
	switch {
	case status == http.StatusServiceUnavailable && errors.Is(err, store.ErrUnavailable):
		// Nothing was written: the caller may try again.
		p.Message = "the database is unavailable; nothing was changed, try again"
	case status == http.StatusInternalServerError:
		p.Message, p.Internal = "internal error", true
	}
	var se *actions.StateError
	if errors.As(err, &se) {
		p.State = se.State
	}
	var ae *ambiguousError
	if errors.As(err, &ae) {
		p.Matches = ae.Matches
	}
	var fe *ForbiddenError
	if errors.As(err, &fe) {
		p.Allowed = fe.Allowed
	}
	return p
}

// Known reports whether err carries one of the classifications Describe
// knows (so its message is meant for the caller).
func Known(err error) bool {
	status, _ := classify(err)
	return status != http.StatusInternalServerError
}

// classify maps an error to its status and code; what it does not know is
// a 500.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, action.ErrInvalid), errors.Is(err, auth.ErrInvalid),
		errors.Is(err, jsonbody.ErrInvalid), errors.Is(err, store.ErrInvalidQuery), errors.Is(err, runs.ErrInvalid),
		errors.Is(err, playbook.ErrInvalid), errors.Is(err, schedule.ErrInvalid), errors.Is(err, enroll.ErrInvalid),
		errors.Is(err, tlsutil.ErrBadCSR), errors.Is(err, nodes.ErrReplaceSelf):
		return http.StatusBadRequest, wire.CodeBadRequest
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized, wire.CodeUnauthorized
	case errors.Is(err, ErrForbidden), errors.Is(err, enroll.ErrRefused):
		return http.StatusForbidden, wire.CodeForbidden
	case errors.Is(err, store.ErrNotFound), errors.Is(err, enroll.ErrDisabled):
		return http.StatusNotFound, wire.CodeNotFound
	case errors.Is(err, ErrWrongState), errors.Is(err, ErrAmbiguous), errors.Is(err, ErrConflict), errors.Is(err, nodes.ErrConfigured),
		errors.Is(err, store.ErrExists), errors.Is(err, action.ErrTransition), errors.Is(err, runs.ErrReplan),
		errors.Is(err, playbook.ErrMoved), errors.Is(err, enroll.ErrHeld), errors.Is(err, nodes.ErrReplacing):
		return http.StatusConflict, wire.CodeConflict
	case errors.Is(err, ErrTooLarge), errors.Is(err, jsonbody.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, wire.CodeTooLarge
	case errors.Is(err, ErrUnprocessable), errors.Is(err, runs.ErrUnresolvable):
		return http.StatusUnprocessableEntity, wire.CodeUnprocessable
	case errors.Is(err, ErrTooMany):
		return http.StatusTooManyRequests, wire.CodeTooMany
	case errors.Is(err, ErrBusy), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, wire.CodeUnavailable
	case errors.Is(err, apiserver.ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, wire.CodeUnsupportedMediaType
	}
	return http.StatusInternalServerError, wire.CodeInternal
}

// errorField is the field a bad request names ("" when none).
func errorField(err error) string {
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
