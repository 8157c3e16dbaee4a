// Package wire holds the request and response bodies of the agent and core
// HTTP APIs (other than the action record itself, which lives in
// shared/action), and the JSON error envelope both APIs answer with.
package wire

import (
	"encoding/json"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// Error codes carried in the error envelope.
const (
	CodeBadRequest    = "bad_request"
	CodeUnauthorized  = "unauthorized"
	CodeForbidden     = "forbidden"
	CodeNotFound      = "not_found"
	CodeConflict      = "conflict"
	CodeGone          = "gone"
	CodeTooLarge      = "too_large"
	CodeUnprocessable = "unprocessable"
	CodeTooMany       = "too_many_requests"
	CodeInternal      = "internal"
	CodeUnavailable   = "unavailable"
	// CodeUnsupportedMediaType: a write whose body is not application/json.
	CodeUnsupportedMediaType = "unsupported_media_type"
)

// ErrorBody is the envelope of every error answer: {"error": {"code", "message"}}.
// Some errors carry details (a 409 from the agent carries its record; an
// ambiguous prefix carries the matching ids; a wrong state carries the state).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Matches []string `json:"matches,omitempty"`
	// Field names the field of the request a 400 is about, when one is.
	Field string `json:"field,omitempty"`
	// State is the state of the action or run a call was refused for.
	State string `json:"state,omitempty"`
	// AllowedRoles are the roles that may do what a 403 refused.
	AllowedRoles []string        `json:"allowed_roles,omitempty"`
	Record       *action.Action  `json:"record,omitempty"`
	Extra        json.RawMessage `json:"extra,omitempty"`
}

// AgentInfo answers GET /api/v1/info on the agent.
type AgentInfo struct {
	NodeID    string               `json:"node_id"`
	ClusterID string               `json:"cluster_id"`
	Version   string               `json:"version"`
	StoreID   string               `json:"store_id"`
	Kinds     []string             `json:"kinds"`
	Queue     map[action.State]int `json:"queue"`
	// Labels are the agent's own labels (docs/architecture.md, "Labels, targets
	// and the disruption budget"); always an object.
	Labels map[string]string `json:"labels"`
	// ArgsSchemas are the JSON Schemas that kinds' args must match, by kind,
	// for the kinds that declare one (args_schema).
	ArgsSchemas map[string]json.RawMessage `json:"args_schemas,omitempty"`
	// PushFields lists the optional fields of a push this agent takes
	// beyond those of its first release (RunPlaceFields). An agent of an
	// earlier release refuses a field it does not know, so a core sends
	// only those listed here.
	PushFields []string `json:"push_fields,omitempty"`
	// Secrets are the names (never the values) of the secrets the agent
	// can resolve in args ({{ secret "NAME" }}), sorted.
	Secrets []string `json:"secrets,omitempty"`
	// Changes is the agent's change counter as of this answer, read before
	// anything else of it (GET /api/v1/changes); absent from agents of an
	// earlier release.
	Changes *ChangeCounter `json:"changes,omitempty"`
}

// ChangeCounter is GET /api/v1/changes (docs/agent.md, "The change
// counter"): Counter moves on every committed change of the agent's queue
// and of its identity, and Epoch is new at every start of the agent, so
// that a counter that starts over is never taken for an unchanged one. The
// core pulls a node fully only when the pair differs from the one it last
// saw (DESIGN §27).
type ChangeCounter struct {
	Epoch   string `json:"epoch"`
	Counter uint64 `json:"counter"`
}

// RunPlaceFields are the fields of a push that place a run's child in its
// run (action.Action's RunID, Stage, Step, Wave, Attempt).
func RunPlaceFields() []string { return []string{"run_id", "stage", "step", "wave", "attempt"} }

// TraceFields are the fields of a push that carry its trace context
// (action.Action's Traceparent), sent only to an agent that lists them.
func TraceFields() []string { return []string{"traceparent"} }

// PushRequest is the body of POST /api/v1/actions on the agent. Only these
// fields may be set by a caller; any other field is refused.
type PushRequest struct {
	ID         string          `json:"id,omitempty"`
	Kind       string          `json:"kind"`
	Args       json.RawMessage `json:"args,omitempty"`
	TimeoutS   int             `json:"timeout_s,omitempty"`
	CreatedTS  *time.Time      `json:"created_ts,omitempty"`
	Origin     string          `json:"origin,omitempty"`
	Requester  string          `json:"requester,omitempty"`
	ApprovedBy string          `json:"approved_by,omitempty"`
	ClusterID  string          `json:"cluster_id,omitempty"`
	NodeID     string          `json:"node_id,omitempty"`
	// The place of a run's child in its run (RunPlaceFields), sent only to
	// an agent whose info lists them; over the agent's socket they are
	// ignored, as approved_by.
	RunID   string `json:"run_id,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Step    string `json:"step,omitempty"`
	Wave    int    `json:"wave,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Traceparent is the W3C trace context of the action (TraceFields),
	// given to the kind's command as $TRACEPARENT.
	Traceparent string `json:"traceparent,omitempty"`
}

// ChangesPage answers GET /api/v1/actions on the agent.
type ChangesPage struct {
	Actions    []action.Action `json:"actions"`
	NextCursor int64           `json:"next_cursor"`
	// More is true when the page was cut by limit and more changes follow.
	More bool `json:"more"`
	// WaitMS is the wait the agent applied to a blocking GET (the wait
	// asked for, cut to its bound), in milliseconds; absent when none was
	// asked for. An agent of an earlier release, which ignores wait, never
	// sends it.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// AckRequest is the body of POST /api/v1/actions/ack on the agent: every
// change up to Cursor is durably stored by the caller.
type AckRequest struct {
	Cursor int64 `json:"cursor"`
}

// Version answers GET /api/v1/version: the build of the core replica that
// answered.
type Version struct {
	Version string `json:"version"`
}

// Health answers the liveness probes.
type Health struct {
	Status string `json:"status"`
}
