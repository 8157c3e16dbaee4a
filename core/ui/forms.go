package ui

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Limits of what the forms accept.
const (
	maxTokenField = 256
	maxReason     = 500
	maxFilter     = 200
	maxNext       = 2048
)

// errForm is a form or query the UI refuses (400 with the message).
var errForm = errors.New("invalid input")

// formErr is an errForm with what the person is told.
type formErr struct{ msg string }

func (e *formErr) Error() string        { return errForm.Error() + ": " + e.msg }
func (e *formErr) Is(target error) bool { return target == errForm }

func formError(format string, args ...any) error {
	return &formErr{msg: fmt.Sprintf(format, args...)}
}

// formMessage is what the person is told of a refused form or query: the
// message of its formError, or the error's own.
func formMessage(err error) string {
	var fe *formErr
	if errors.As(err, &fe) {
		return fe.msg
	}
	return err.Error()
}

// safeNext returns raw when it is a path of this UI ("/ui/..." with an
// optional query), cleaned, and "" otherwise: a sign-in or a form never sends
// the browser to another site or outside /ui/.
func safeNext(raw string) string {
	if raw == "" || len(raw) > maxNext || !strings.HasPrefix(raw, "/ui/") ||
		strings.ContainsAny(raw, "\\") || hasControl(raw) {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	p := path.Clean(u.Path)
	if !strings.HasPrefix(p, "/ui/") {
		return ""
	}
	if strings.HasSuffix(u.Path, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	out := (&url.URL{Path: p, RawQuery: u.RawQuery}).RequestURI()
	if !strings.HasPrefix(out, "/ui/") || strings.HasPrefix(out, "//") {
		return ""
	}
	return out
}

// hasControl reports a control character or invalid UTF-8 in s.
func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// plainField reads one optional text field: trimmed, at most max bytes, no
// control characters.
func plainField(v url.Values, name string, max int) (string, error) {
	s := strings.TrimSpace(v.Get(name))
	if len(s) > max {
		return "", formError("%s is longer than %d bytes", name, max)
	}
	if hasControl(s) {
		return "", formError("%s contains control characters", name)
	}
	return s, nil
}

// loginForm is the sign-in form.
type loginForm struct {
	Token string
	Next  string // "" when absent or unsafe
	CSRF  string
}

func decodeLogin(v url.Values) (loginForm, error) {
	var f loginForm
	tok, err := plainField(v, "token", maxTokenField)
	if err != nil {
		return f, err
	}
	if tok == "" {
		return f, formError("paste your API token (it starts with mst_)")
	}
	f.Token = tok
	f.Next = safeNext(v.Get("next"))
	f.CSRF = v.Get("csrf")
	return f, nil
}

// decision is approve or reject.
type decision string

const (
	decisionApprove decision = "approve"
	decisionReject  decision = "reject"
	// decisionUrgent marks an action urgent: it passes a closed window.
	decisionUrgent decision = "urgent"
)

// decisionForm is the approve or reject form of an action.
type decisionForm struct {
	Reason string
	Next   string // "" when absent or unsafe
}

func decodeDecision(d decision, v url.Values) (decisionForm, error) {
	var f decisionForm
	reason, err := plainField(v, "reason", maxReason)
	if err != nil {
		return f, err
	}
	if d == decisionReject && reason == "" {
		return f, formError("a rejection needs a reason, for the requester and the audit trail")
	}
	if d == decisionUrgent && reason == "" {
		return f, formError("marking urgent needs a reason: say why it may not wait for the window")
	}
	f.Reason = reason
	f.Next = safeNext(v.Get("next"))
	return f, nil
}

// actionFilter is the filter of the Actions page.
type actionFilter struct {
	Cluster, Node, Kind, Marker string
	State                       action.State
}

func decodeActionFilter(v url.Values) (actionFilter, error) {
	var f actionFilter
	var err error
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "node": &f.Node, "kind": &f.Kind} {
		if *dst, err = plainField(v, name, maxFilter); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(v.Get("state")); s != "" {
		st, err := action.ParseState(strings.ToUpper(s))
		if err != nil {
			return f, formError("state %q is not one of %s", s, states())
		}
		f.State = st
	}
	if m := v.Get("marker"); m != "" {
		if !action.ValidID(m) {
			return f, formError("marker is not an action id")
		}
		f.Marker = m
	}
	return f, nil
}

// query returns the store query of the filter, for one page of n.
func (f actionFilter) query(n int) store.ListQuery {
	q := store.ListQuery{ClusterID: f.Cluster, NodeID: f.Node, Marker: f.Marker, Limit: n,
		Sort: []store.SortKey{{Field: "created_ts", Desc: true}}}
	if f.State != "" {
		q.States = []action.State{f.State}
	}
	if f.Kind != "" {
		q.Kinds = []string{f.Kind}
	}
	return q
}

// values returns the filter as a query string (without the marker).
func (f actionFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"cluster": f.Cluster, "node": f.Node, "kind": f.Kind, "state": string(f.State)} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func states() string {
	out := make([]string, len(action.States))
	for i, s := range action.States {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// eventTypes are the event types the Events page and the live stream
// filter on: each family ("run.*") followed by its types, all from the
// store's one list, so that a new event type is never refused here.
var eventTypes = func() []string {
	var out []string
	for _, fam := range store.EventTypeFamilies() {
		out = append(out, fam+".*")
		for _, t := range store.EventTypes {
			if strings.HasPrefix(t, fam+".") {
				out = append(out, t)
			}
		}
	}
	return out
}()

// eventFilter is the filter of the Events page and of the live stream.
// Type may list several types or families, separated by commas (the stream
// of a page that shows actions and runs); Run is a run id, or "*" for the
// events of any run.
type eventFilter struct {
	Type, Cluster, Node, Action, Run string
}

func decodeEventFilter(v url.Values) (eventFilter, error) {
	var f eventFilter
	var err error
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "node": &f.Node} {
		if *dst, err = plainField(v, name, maxFilter); err != nil {
			return f, err
		}
	}
	if t := strings.TrimSpace(v.Get("type")); t != "" {
		for _, one := range strings.Split(t, ",") {
			if !slices.Contains(eventTypes, one) {
				return f, formError("event type %q is not known", one)
			}
		}
		f.Type = t
	}
	if r := strings.TrimSpace(v.Get("run")); r != "" {
		if r != "*" && !action.ValidID(r) {
			return f, formError("run is not a run id")
		}
		f.Run = r
	}
	if a := strings.TrimSpace(v.Get("action")); a != "" {
		if !action.ValidID(a) {
			return f, formError("action is not an action id")
		}
		f.Action = a
	}
	return f, nil
}

func (f eventFilter) keep(e *store.Event) bool {
	if f.Type != "" && !slices.ContainsFunc(strings.Split(f.Type, ","), func(t string) bool {
		if fam, ok := strings.CutSuffix(t, "*"); ok {
			return strings.HasPrefix(e.Type, fam)
		}
		return e.Type == t
	}) {
		return false
	}
	if f.Run != "" && (e.RunID == "" || f.Run != "*" && e.RunID != f.Run) {
		return false
	}
	return (f.Cluster == "" || e.ClusterID == f.Cluster) && (f.Node == "" || e.NodeID == f.Node) &&
		(f.Action == "" || e.ActionID == f.Action)
}

func (f eventFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"type": f.Type, "cluster": f.Cluster, "node": f.Node, "action": f.Action, "run": f.Run} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}
