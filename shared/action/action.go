package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/musterhq/muster/shared/names"
)

// Origin says where an action was created.
const (
	OriginCore  = "core"
	OriginAgent = "agent"
)

// Limits shared by both APIs.
const (
	MaxOutput     = 64 << 10 // the last 64 KiB of output are kept
	MaxArgs       = 64 << 10 // args larger than this are refused
	MaxArgsDepth  = 64       // args nested deeper than this are refused
	MaxTimeoutS   = 7 * 24 * 3600
	MinPrefix     = 8
	MaxKindLength = 200
)

// Action is the record of docs/architecture.md, "Actions", identical in both APIs.
type Action struct {
	ID          string          `json:"id"`
	ClusterID   string          `json:"cluster_id"`
	NodeID      string          `json:"node_id"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	State       State           `json:"state"`
	StateReason string          `json:"state_reason"`
	Progress    json.RawMessage `json:"progress"`
	Output      string          `json:"output"`
	Origin      string          `json:"origin"`
	Requester   string          `json:"requester"`
	ApprovedBy  string          `json:"approved_by"`
	TimeoutS    int             `json:"timeout_s"`
	CreatedTS   time.Time       `json:"created_ts"`
	ScheduledTS *time.Time      `json:"scheduled_ts"`
	StartedTS   *time.Time      `json:"started_ts"`
	FinishedTS  *time.Time      `json:"finished_ts"`
	UpdatedTS   time.Time       `json:"updated_ts"`

	// RetryOf links an action made by retry to the one it repeats (core only).
	RetryOf string `json:"retry_of,omitempty"`
	// RunID, Stage, Step, Wave and Attempt place a run's child action in
	// its run (empty for an action of its own). A run has at most one
	// child per stage, node, step and attempt; Step is "" in a stage
	// without steps, Attempt counts from 1 (0 in a child stored before
	// steps existed). The core pushes them to an agent that takes them
	// (wire.AgentInfo.PushFields), which keeps and shows them: they are
	// not content (SameContent), and the core never takes them from an
	// agent.
	RunID   string `json:"run_id,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Step    string `json:"step,omitempty"`
	Wave    int    `json:"wave,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Traceparent is the W3C trace context the core pushed with the
	// action (wire.TraceFields): the agent keeps it and gives it to the
	// kind's command as $TRACEPARENT (docs/architecture.md, "Traces").
	// Not content; empty when tracing is off.
	Traceparent string `json:"traceparent,omitempty"`
	// NotBefore: the core pushes the action no earlier than this (core
	// only; docs/architecture.md, "Windows, freezes and later starts").
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Urgent is the reason an approver gave to let the action pass a
	// closed maintenance window, never a freeze (core only; "" when not
	// urgent).
	Urgent string `json:"urgent,omitempty"`
	// Outputs is the JSON object of strings the command wrote to the file
	// named in $MUSTER_OUTPUTS (absent when it wrote none).
	Outputs json.RawMessage `json:"outputs,omitempty"`
	// History lists every transition; filled only by "show" calls.
	History []Transition `json:"history,omitempty"`
}

// Transition is one line of an action's history.
type Transition struct {
	TS     time.Time `json:"ts"`
	From   State     `json:"from"`
	To     State     `json:"to"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
}

// Reasons used by more than one package.
const (
	ReasonTimeout     = "timeout"
	ReasonInterrupted = "interrupted"
	ReasonCancelled   = "cancelled"
)

// Reasons of a PENDING_SCHEDULE action the core holds for its time: its
// cluster's maintenance window, a freeze, its not_before (core/schedule
// writes them, core/orchestrate holds with them). Each starts the reason.
const (
	ReasonOutsideWindow = "outside the maintenance window"
	ReasonFrozen        = "frozen until "
	ReasonNotBefore     = "not before "
)

// HeldByCalendar reports whether a state_reason says the action waits for
// its cluster's window or the end of a freeze.
func HeldByCalendar(reason string) bool {
	return strings.HasPrefix(reason, ReasonOutsideWindow) || strings.HasPrefix(reason, ReasonFrozen)
}

// HeldForTime reports whether a state_reason says the action waits for its
// time: a window, the end of a freeze, or its not_before.
func HeldForTime(reason string) bool {
	return HeldByCalendar(reason) || strings.HasPrefix(reason, ReasonNotBefore)
}

// Errors returned by validation.
var (
	ErrInvalid = errors.New("invalid action")
)

var kindRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(/[A-Za-z0-9][A-Za-z0-9._-]*)+$`)

// ValidKind reports whether k looks like "domain/name".
func ValidKind(k string) bool {
	return len(k) <= MaxKindLength && kindRE.MatchString(k)
}

// ValidID reports whether id is a UUID in its canonical textual form.
func ValidID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// MaxTimeout is the longest timeout an action may have (MaxTimeoutS).
const MaxTimeout = MaxTimeoutS * time.Second

// CheckTimeoutS checks the timeout_s of a request: 0 (or absent) for the
// default, else at most MaxTimeoutS. Both APIs refuse with this wording.
func CheckTimeoutS(s int) error {
	if s < 0 || s > MaxTimeoutS {
		return fmt.Errorf("timeout_s must be between 0 (the default) and %d (%s), got %d", MaxTimeoutS, MaxTimeout, s)
	}
	return nil
}

// CheckTimeout checks a configured timeout (an agent's default_timeout, an
// external kind's timeout): at most MaxTimeout; 0 leaves the default.
func CheckTimeout(d time.Duration) error {
	if d < 0 || d > MaxTimeout {
		return fmt.Errorf("a timeout must be between 0 (the default) and %s, got %s", MaxTimeout, d)
	}
	return nil
}

// NewID returns a fresh UUID v4.
func NewID() string { return uuid.NewString() }

// NormalizeArgs checks that raw is a JSON object (or empty, meaning {}) of at
// most MaxArgs bytes, and returns it in canonical form: keys sorted, no
// insignificant white space. Two args are the same when their canonical forms
// are byte-equal.
func NormalizeArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if len(raw) > MaxArgs {
		return nil, fmt.Errorf("%w: args larger than %d bytes", ErrInvalid, MaxArgs)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: args must be a JSON object", ErrInvalid)
	}
	if depth(obj) > MaxArgsDepth {
		return nil, fmt.Errorf("%w: args nested deeper than %d levels", ErrInvalid, MaxArgsDepth)
	}
	out, err := json.Marshal(obj) // encoding/json sorts map keys
	if err != nil {
		return nil, fmt.Errorf("%w: args: %v", ErrInvalid, err)
	}
	return out, nil
}

// depth is how deeply objects and lists nest in v (1 for a flat object).
func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// CheckRunPlace checks the place in a run that a push gives an action:
// none, or a run id (a UUID in canonical form) with a stage and a step
// named as names.CheckStep says (or none), and a wave and an attempt not
// below 0.
func CheckRunPlace(a *Action) error {
	if a.RunID == "" {
		if a.Stage != "" || a.Step != "" || a.Wave != 0 || a.Attempt != 0 {
			return fmt.Errorf("%w: stage, step, wave and attempt need a run_id", ErrInvalid)
		}
		return nil
	}
	if !ValidID(a.RunID) {
		return fmt.Errorf("%w: run_id %.100q is not a UUID in canonical form", ErrInvalid, a.RunID)
	}
	for field, v := range map[string]string{"stage": a.Stage, "step": a.Step} {
		if v == "" {
			continue
		}
		if err := names.CheckStep(v); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
		}
	}
	if a.Wave < 0 || a.Attempt < 0 {
		return fmt.Errorf("%w: wave and attempt must not be negative", ErrInvalid)
	}
	return nil
}

// ValidTraceparent reports whether s is a W3C traceparent of version 00:
// 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase, ids
// not all zero.
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	hex := func(p string) bool {
		zero := true
		for _, c := range p {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
			if c != '0' {
				zero = false
			}
		}
		return !zero
	}
	flags := s[53:]
	return hex(s[3:35]) && hex(s[36:52]) && (hex(flags) || flags == "00")
}

// SameContent reports whether two records carry the same kind and args.
func SameContent(a, b *Action) bool {
	if a.Kind != b.Kind {
		return false
	}
	x, err1 := NormalizeArgs(a.Args)
	y, err2 := NormalizeArgs(b.Args)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// ClipOutput keeps the last MaxOutput bytes of s, cut on a rune boundary.
func ClipOutput(s string) string {
	if len(s) <= MaxOutput {
		return s
	}
	s = s[len(s)-MaxOutput:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 { // not a continuation byte
			return s[i:]
		}
	}
	return s
}

// UTC returns t rounded to microseconds in UTC, the precision both stores keep.
func UTC(t time.Time) time.Time { return t.UTC().Round(time.Microsecond) }

// TimePtr returns a pointer to UTC(t).
func TimePtr(t time.Time) *time.Time { u := UTC(t); return &u }
