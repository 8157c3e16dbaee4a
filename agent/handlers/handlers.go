// Package handlers holds the action kinds an agent can run: the built-in
// debug kinds and the external kinds declared in its configuration. A handler
// advances its action one step at a time and returns quickly; it never
// sleeps or blocks on an outside wait.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/secret"
)

// Status is the outcome of one step.
type Status int

// Step outcomes.
const (
	Running Status = iota // call me again after Result.After
	Done                  // finished successfully
	Failed                // finished unsuccessfully; Result.Message says why
	// Stopped: the step's context ended (a cancel or the deadline) and
	// the work stopped before it finished; the runner records why.
	Stopped
)

// Result is what a step returns.
type Result struct {
	Status  Status
	Message string
	// After is how long to wait before the next step (Running only).
	After time.Duration
}

// ErrBadArgs is returned (wrapped) by Validate for args a kind refuses.
var ErrBadArgs = errors.New("bad args")

// Handler runs one kind of action.
type Handler interface {
	// Validate checks args before the action is queued.
	Validate(args json.RawMessage) error
	// Step advances the action. When ctx is done (cancel or timeout), the
	// handler stops its work and returns Stopped once it has; but work that
	// had finished before it could be stopped (a command that had already
	// exited) returns Done or Failed as it ended: the deadline applies only
	// to work still running.
	Step(ctx context.Context, x *Exec) Result
}

// Exec is one run of one action, handed to every step of that run.
type Exec struct {
	// Action is the record as it was when the run began.
	Action action.Action
	// Resumed is true when an earlier agent process started this action.
	Resumed bool
	// Progress is the handler's persisted data; the runner saves it after
	// every step, so a resumed run starts from it.
	Progress json.RawMessage
	// State is the handler's in-memory state for this run; nil on the first
	// step, and again after a restart.
	State any
	// Outputs is what the action's command passed on ($MUSTER_OUTPUTS): a
	// JSON object of strings, saved with the action's final state.
	Outputs json.RawMessage

	mu  sync.Mutex
	out []byte
	// redact replaces the values of the secrets resolved for this run in
	// all it reports (docs/architecture.md, "Secrets").
	redact *secret.Redactor
}

// addRedactor makes x redact r's values too, from the output already
// written on.
func (x *Exec) addRedactor(r *secret.Redactor) {
	if r.Empty() {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.redact == nil {
		x.redact = &secret.Redactor{}
	}
	x.redact.Merge(r)
	x.out = []byte(x.redact.Redact(string(x.out)))
}

// Redact returns s with the values of the secrets resolved for this run
// replaced by [redacted:NAME].
func (x *Exec) Redact(s string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.redact.Redact(s)
}

// NewExec starts a run of a, with the output and progress it already has.
func NewExec(a *action.Action, resumed bool) *Exec {
	return &Exec{Action: *a, Resumed: resumed, Progress: a.Progress, out: []byte(a.Output)}
}

// Write appends to the action's output, keeping the last action.MaxOutput bytes.
// It is safe to call from the goroutines that copy a process's output.
func (x *Exec) Write(p []byte) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	from := len(x.out)
	x.out = append(x.out, p...)
	if !x.redact.Empty() {
		// A value cut between two writes is whole once the second is
		// appended: look back as far as the longest value, less a byte.
		from = max(0, from-x.redact.Longest()+1)
		x.out = append(x.out[:from], x.redact.Redact(string(x.out[from:]))...)
	}
	if len(x.out) > 2*action.MaxOutput {
		x.out = append(x.out[:0], x.out[len(x.out)-action.MaxOutput:]...)
	}
	return len(p), nil
}

// Printf appends a formatted line to the output.
func (x *Exec) Printf(format string, a ...any) {
	_, _ = fmt.Fprintf(x, format+"\n", a...)
}

// Output returns the last action.MaxOutput bytes of output.
func (x *Exec) Output() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return action.ClipOutput(string(x.out))
}

// LiveOutput is Output while the command still runs: the bytes at its end
// that could begin a secret's value being written in pieces are held back
// until the next write shows whether they are one (docs/architecture.md,
// "Secrets").
func (x *Exec) LiveOutput() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := string(x.out)
	return action.ClipOutput(out[:len(out)-x.redact.Pending(out)])
}

// SetProgress stores v as the progress.
func (x *Exec) SetProgress(v any) {
	b, err := json.Marshal(v)
	if err == nil {
		x.Progress = b
	}
}

// Registry maps kinds to handlers.
type Registry struct {
	handlers map[string]Handler
	timeouts map[string]time.Duration
}

// NewRegistry returns the built-in kinds and the given external ones.
func NewRegistry(external []External, env Env) (*Registry, error) {
	r := &Registry{handlers: map[string]Handler{}, timeouts: map[string]time.Duration{}}
	if env.Secrets == nil {
		env.Secrets = noSecrets
	}
	r.handlers[KindPing] = ping{}
	r.handlers[KindSleep] = sleep{}
	r.handlers[KindFail] = fail{}
	for i := range external {
		e := external[i]
		if _, dup := r.handlers[e.Kind]; dup {
			return nil, fmt.Errorf("actions.external: kind %q declared twice", e.Kind)
		}
		sch, err := e.schema()
		if err != nil {
			return nil, fmt.Errorf("actions.external[%d].args_schema: %w", i, err)
		}
		r.handlers[e.Kind] = &externalHandler{spec: e, env: env, schema: sch}
		if e.Timeout > 0 {
			r.timeouts[e.Kind] = e.Timeout
		}
	}
	return r, nil
}

// Get returns the handler of kind.
func (r *Registry) Get(kind string) (Handler, bool) {
	h, ok := r.handlers[kind]
	return h, ok
}

// Timeout returns the kind's own timeout, or 0 when it has none.
func (r *Registry) Timeout(kind string) time.Duration { return r.timeouts[kind] }

// Kinds lists the known kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Schemas returns the args_schema of every kind that declares one, by kind,
// in canonical JSON.
func (r *Registry) Schemas() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, h := range r.handlers {
		if e, ok := h.(*externalHandler); ok && e.schema != nil {
			out[k] = e.schema.raw
		}
	}
	return out
}

// decodeArgs decodes args strictly into v.
func decodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytesReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgs, err)
	}
	return nil
}
