package wire

import (
	"encoding/json"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
)

// Target picks nodes of one cluster (docs/architecture.md, "Runs and
// playbooks"): exactly one of Nodes, Labels (every pair must match) or All.
type Target struct {
	Nodes  []string          `json:"nodes,omitempty" yaml:"nodes,omitempty"`
	Labels map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	All    bool              `json:"all,omitempty" yaml:"all,omitempty"`
}

// StageSpec is one stage of a run as a caller asks for it: one kind and args
// on a target, in waves bounded by its limits.
type StageSpec struct {
	Name string          `json:"name"`
	Kind string          `json:"kind"`
	Args json.RawMessage `json:"args,omitempty"`
	// Target picks the stage's nodes; it is resolved when the run is created.
	Target Target `json:"target"`
	// MaxConcurrency: at most this many nodes with an unfinished child at
	// once (a count or a percentage of the stage's nodes; default 1).
	MaxConcurrency *limit.Limit `json:"max_concurrency,omitempty"`
	// MaxErrors: the stage stops when more children than this have failed
	// (default 0).
	MaxErrors *limit.Limit `json:"max_errors,omitempty"`
	// OnFailure is "abort" (the default: the run ends FAILED), "pause" or
	// "continue" (never stop for errors).
	OnFailure string `json:"on_failure,omitempty"`
	// DependsOn names the stages that must be DONE first. Absent: the
	// previous stage; an empty list: none.
	DependsOn []string `json:"depends_on"`
	// TimeoutS is each child's timeout; 0 leaves it to the agent.
	TimeoutS int `json:"timeout_s,omitempty"`
	// Steps, when given, is the procedure every node of the stage goes
	// through in order, node first (Kind, Args and TimeoutS are then
	// left empty). A stage without steps is one step of Kind and Args.
	Steps []StepSpec `json:"steps,omitempty"`
	// Rollback runs on a node whose procedure failed, after its steps
	// with when "always", each once and in order.
	Rollback []StepSpec `json:"rollback,omitempty"`
	// Canary: once the first Canary nodes are done without error, the run
	// is PAUSED until an approver other than the requester promotes it.
	Canary int `json:"canary,omitempty"`
	// SoakS keeps a node in flight this long after its last step.
	SoakS int `json:"soak_s,omitempty"`
	// Unavailable says what becomes of a DOWN or drained node at its
	// turn: "fail" (the default: an error at once), "skip" (recorded
	// skipped) or "wait" (up to UnavailableTimeoutS, default 600, then
	// an error).
	Unavailable         string `json:"unavailable,omitempty"`
	UnavailableTimeoutS int    `json:"unavailable_timeout_s,omitempty"`
	// IncludeFailed runs the stage on nodes that failed an earlier stage
	// of the run too; without it they are skipped (listed with the stage
	// they failed).
	IncludeFailed bool `json:"include_failed,omitempty"`
	// Follow, on a stage whose target is labels, adds to the stage the
	// nodes that join the cluster with those labels while it runs: the
	// plan and its approval cover "the nodes matching", not a list.
	Follow bool `json:"follow,omitempty"`
	// Lock is a lock the stage takes while it runs: a run taking the same
	// lock waits until the stage ends.
	Lock *Lock `json:"lock,omitempty"`
	// AutoPromoteAfterS promotes a canary by itself once every canary
	// node's gates have held this long after the canary went through (0:
	// an approver promotes it).
	AutoPromoteAfterS int `json:"auto_promote_after_s,omitempty"`
	// AbortOn names gate steps of the stage whose failure during the
	// canary, or during a gate's soak, aborts the run (rollback included).
	AbortOn []string `json:"abort_on,omitempty"`
}

// StepSpec is one step of a stage's procedure.
type StepSpec struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args,omitempty"`
	TimeoutS int             `json:"timeout_s,omitempty"`
	// Retry tries a failed step again, each attempt a new child action.
	Retry *Retry `json:"retry,omitempty"`
	// When is "" (run while the node has not failed), "always" (run even
	// after a failed step), or a template over .params, .node (id,
	// labels) and .steps.NAME (state, outputs) of the same node that
	// renders true or false; false records the step SKIPPED, no child.
	When string `json:"when,omitempty"`
	// Gate, instead of a kind, is a check the core makes (not the agent);
	// Call is a request the core sends. Either is stored as the step's
	// kind (core/gate, core/call) and args.
	Gate *Gate `json:"gate,omitempty"`
	Call *Call `json:"call,omitempty"`
	// SoakS keeps a gate under watch this long after it first passes: it
	// passes once it has held so long.
	SoakS int `json:"soak_s,omitempty"`
}

// Gate is a check the core makes of a node or a stage: one of HTTP or
// Prometheus. Its strings may use the node's templates ({{ .node.id }},
// {{ .node.labels.NAME }}).
type Gate struct {
	HTTP       *HTTPGate       `json:"http,omitempty"`
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`
}

// HTTPGate passes when a GET of URL answers ExpectStatus (default 200)
// and, when given, a body containing BodyContains.
type HTTPGate struct {
	URL          string `json:"url"`
	ExpectStatus int    `json:"expect_status,omitempty"`
	BodyContains string `json:"body_contains,omitempty"`
}

// PrometheusGate passes when every sample of the instant query Query, asked
// of the Prometheus server at URL, meets Expect ("< 0.01", ">= 1", "== 0").
// A query without samples fails.
type PrometheusGate struct {
	URL    string `json:"url"`
	Query  string `json:"query"`
	Expect string `json:"expect"`
}

// Call is a request the core sends as a step of a node's procedure.
type Call struct {
	HTTP *HTTPCall `json:"http,omitempty"`
}

// HTTPCall is an HTTP request; it succeeds on a 2xx answer. Header values
// may reference the core's secrets ({{ secret "name" }}): the reference is
// stored and shown, the value is read when the request is sent.
type HTTPCall struct {
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url"`
	Body    string            `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// CoreStep is the result of a gate or a call the core ran for a node: its
// latest attempt, the value it saw, when, and its verdict.
type CoreStep struct {
	Node    string `json:"node"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	// State is PENDING (not evaluated yet), RUNNING (a gate under its
	// soak), DONE or FAILED.
	State string `json:"state"`
	// Value is what the core saw: a status code, a query's value.
	Value string `json:"value,omitempty"`
	// Reason says why it failed, or how it passed.
	Reason string `json:"reason,omitempty"`
	// Checks counts its evaluations in this attempt until it ended; after
	// that (the gates of a canary waiting for its promote, watched) only
	// those that saw another value. At is when the counted last was made.
	Checks   int        `json:"checks,omitempty"`
	At       *time.Time `json:"at,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
}

// Retry is how a failed step is tried again: at most Attempts tries in
// all (the first included), the n-th retry waiting DelayS × Backoff^(n-1)
// seconds, at most MaxDelayS.
type Retry struct {
	Attempts  int     `json:"attempts"`
	DelayS    int     `json:"delay_s,omitempty"`
	Backoff   float64 `json:"backoff,omitempty"`
	MaxDelayS int     `json:"max_delay_s,omitempty"`
}

// CreateRunRequest is the body of POST /api/v1/runs.
type CreateRunRequest struct {
	ClusterID string      `json:"cluster_id"`
	Stages    []StageSpec `json:"stages"`
	// DeadlineS: this long after the run starts, no new node starts, and
	// the run ends FAILED (reason deadline) once its nodes in flight are
	// done (0: none).
	DeadlineS int `json:"deadline_s,omitempty"`
	// NotBefore: no child of the run is pushed before it (RFC 3339; nil:
	// at once).
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Lock is a lock the run takes from its start to its end: another run
	// taking the same lock waits until this one ends.
	Lock *Lock `json:"lock,omitempty"`
}

// Stage is one stage of a run as the core shows it: its spec with the target
// resolved and the limits made counts, and its progress.
type Stage struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Args are left out of run lists: GET /api/v1/runs/{id} has them.
	Args   json.RawMessage `json:"args,omitempty"`
	Target Target          `json:"target"`
	// Nodes are the stage's nodes; run lists hold only the first of them
	// (GET /api/v1/runs/{id} has them all), and NodeCount counts them all.
	Nodes          []string    `json:"nodes"`
	NodeCount      int         `json:"node_count"`
	MaxConcurrency limit.Limit `json:"max_concurrency"`
	MaxErrors      limit.Limit `json:"max_errors"`
	OnFailure      string      `json:"on_failure"`
	DependsOn      []string    `json:"depends_on"`
	TimeoutS       int         `json:"timeout_s,omitempty"`

	State string `json:"state"`
	// Progress counts the stage's nodes by where they stand.
	Progress NodeProgress `json:"progress"`
	// Counts counts the stage's children by state (every attempt and
	// rollback step is a child: Progress counts nodes), and "PENDING" the
	// nodes without a child yet.
	Counts map[string]int `json:"counts"`
	// Errors counts what counts against max_errors: the failed nodes of a
	// stage with steps, the failed children of another.
	Errors int `json:"errors"`
	// Steps and Rollback are the stage's procedure, in order (absent for
	// a one-step stage of Kind and Args).
	Steps    []StepSpec `json:"steps,omitempty"`
	Rollback []StepSpec `json:"rollback,omitempty"`
	// Failed lists the stage's failed nodes, Skipped those it skipped.
	Failed  []string `json:"failed,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Canary, SoakS, Unavailable and UnavailableTimeoutS are the spec's;
	// Promoted says an approver promoted the canary.
	Canary              int    `json:"canary,omitempty"`
	Promoted            bool   `json:"promoted,omitempty"`
	SoakS               int    `json:"soak_s,omitempty"`
	Unavailable         string `json:"unavailable,omitempty"`
	UnavailableTimeoutS int    `json:"unavailable_timeout_s,omitempty"`
	IncludeFailed       bool   `json:"include_failed,omitempty"`
	// Follow: the stage takes the nodes that join with its labels while
	// it runs; Joined lists those it took.
	Follow bool     `json:"follow,omitempty"`
	Joined []string `json:"joined,omitempty"`
	// NotInRun lists the cluster's nodes that match the stage's target now
	// but are not among its nodes (they joined after it was planned or
	// after it ended, or were left out when it was planned: DOWN, beyond
	// a limit, without its kinds): the run does not touch them. Filled only by GET
	// /api/v1/runs/{id} and the run's page.
	NotInRun []string `json:"not_in_run,omitempty"`
	// Lock is the lock the stage takes while it runs.
	Lock *Lock `json:"lock,omitempty"`
	// KindLocks are the locks the kinds of its steps declare in the
	// core's kinds: configuration, taken with Lock while the stage runs.
	KindLocks []KindLock `json:"kind_locks,omitempty"`
	// Reuse lists the nodes of a retry from the failed step that start
	// past their first step: the steps they take as done, with the
	// outputs of the run retried.
	Reuse []ReusedNode `json:"reuse,omitempty"`
	// ForgivenBy records each resume that forgave the stage's errors
	// ("forgiven by bob: REASON"), PromotedBy its canary's promotion
	// ("promoted by bob: REASON").
	ForgivenBy []string `json:"forgiven_by,omitempty"`
	PromotedBy string   `json:"promoted_by,omitempty"`
	// AutoPromoteAfterS and AbortOn are the spec's; CoreSteps are the
	// results of its gates and calls, node by node.
	AutoPromoteAfterS int        `json:"auto_promote_after_s,omitempty"`
	AbortOn           []string   `json:"abort_on,omitempty"`
	CoreSteps         []CoreStep `json:"core_steps,omitempty"`
}

// NodeProgress is where a stage's nodes stand (or a run's, every stage's
// summed), counted in nodes, never in attempts: a node whose step failed
// five times is one failed node. Done, Failed, Skipped, InFlight (from its
// first step until its last ended and its soak passed, a failed node's
// rollback aside), RolledBack (an aborted stage's nodes whose rollback
// ended) and Waiting (not started: in a final run, never started) add up
// to Total.
type NodeProgress struct {
	Done       int `json:"done"`
	Failed     int `json:"failed"`
	Skipped    int `json:"skipped"`
	InFlight   int `json:"in_flight"`
	Waiting    int `json:"waiting"`
	RolledBack int `json:"rolled_back,omitempty"`
	Total      int `json:"total"`
}

// NodeCount is one count of a NodeProgress with its words.
type NodeCount struct {
	What string
	N    int
}

// Counts lists p's counts above zero, in the order every surface says
// them: done, in flight, failed, skipped, rolled back, waiting.
func (p NodeProgress) Counts() []NodeCount {
	var out []NodeCount
	for _, c := range []NodeCount{{"done", p.Done}, {"in flight", p.InFlight}, {"failed", p.Failed},
		{"skipped", p.Skipped}, {"rolled back", p.RolledBack}, {"waiting", p.Waiting}} {
		if c.N > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Finished counts the nodes that will not move again in the stage.
func (p NodeProgress) Finished() int { return p.Done + p.Failed + p.Skipped + p.RolledBack }

// Add adds q to p.
func (p *NodeProgress) Add(q NodeProgress) {
	p.Done += q.Done
	p.Failed += q.Failed
	p.Skipped += q.Skipped
	p.InFlight += q.InFlight
	p.Waiting += q.Waiting
	p.RolledBack += q.RolledBack
	p.Total += q.Total
}

// Size is how many nodes the stage has (NodeCount; len(Nodes) from a core
// that does not send it).
func (s *Stage) Size() int { return max(s.NodeCount, len(s.Nodes)) }

// RunChild is one cell of a run's per-node grid.
type RunChild struct {
	Stage    string       `json:"stage"`
	NodeID   string       `json:"node_id"`
	Wave     int          `json:"wave"`
	ActionID string       `json:"action_id,omitempty"`
	State    action.State `json:"state,omitempty"`
	// Steps are the node's children in this stage, in the order they were
	// created (every attempt of every step), with their rendered args.
	Steps []RunStepChild `json:"steps,omitempty"`
}

// RunStepChild is one child of a node in a stage of steps.
type RunStepChild struct {
	Step     string          `json:"step"`
	Attempt  int             `json:"attempt"`
	ActionID string          `json:"action_id"`
	State    action.State    `json:"state"`
	Reason   string          `json:"state_reason,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Outputs  json.RawMessage `json:"outputs,omitempty"`
}

// RunSummary lists the nodes of a finished run that failed or were skipped.
type RunSummary struct {
	Failed  []StageNode `json:"failed"`
	Skipped []StageNode `json:"skipped"`
}

// StageNode names a node of a stage, and why it failed or was skipped.
type StageNode struct {
	Stage  string `json:"stage"`
	NodeID string `json:"node_id"`
	// Reason: a skipped node is "failed stage NAME" (it failed an earlier
	// stage) or "unavailable at its turn"; a failed node's is its failed
	// step and attempt and that child's reason ("step upgrade FAILED
	// (attempt 3 of 3): run exited with status 3"), and Output the last
	// lines of that child's output (at most 5 lines, 512 bytes), as printed:
	// escape them to show them. A run keeps why for the first 20 failed
	// nodes of a stage.
	Reason string `json:"reason,omitempty"`
	Output string `json:"output,omitempty"`
	// ActionID is the child that failed the node.
	ActionID string `json:"action_id,omitempty"`
}

// Run is a run as the core shows it.
type Run struct {
	ID              string  `json:"id"`
	ClusterID       string  `json:"cluster_id"`
	State           string  `json:"state"`
	StateReason     string  `json:"state_reason"`
	Requester       string  `json:"requester"`
	ApprovedBy      string  `json:"approved_by"`
	Playbook        string  `json:"playbook,omitempty"`
	PlaybookVersion int     `json:"playbook_version,omitempty"`
	Digest          string  `json:"digest"`
	Stages          []Stage `json:"stages"`
	// Progress sums the stages' progress, in nodes (a node in two stages
	// counts in each).
	Progress   NodeProgress `json:"progress"`
	CreatedTS  time.Time    `json:"created_ts"`
	UpdatedTS  time.Time    `json:"updated_ts"`
	FinishedTS *time.Time   `json:"finished_ts"`
	// Children is the per-node grid, filled only by GET /api/v1/runs/{id}:
	// every cell of a run of at most 100 nodes; of a larger one (NodesPaged)
	// only the cells of up to 100 nodes in flight.
	Children []RunChild `json:"children,omitempty"`
	// Approval is where the approval it waits for stands (its own, a
	// resume past errors or a canary's promote); only in GET
	// /api/v1/runs/{id} and the answers of its decisions.
	Approval *Approval `json:"approval,omitempty"`
	// NodesPaged says the run is too large to be shown whole: Children
	// holds the cells in flight, each stage's Nodes its first nodes (with
	// NodeCount), and GET /api/v1/runs/{id}/nodes pages every cell.
	NodesPaged bool `json:"nodes_paged,omitempty"`
	// RetryOf is the run whose failed and skipped nodes this run retries.
	RetryOf string `json:"retry_of,omitempty"`
	// DeadlineS is the run's deadline; DeadlineTS when it falls, once the
	// run started.
	DeadlineS  int        `json:"deadline_s,omitempty"`
	DeadlineTS *time.Time `json:"deadline_ts,omitempty"`
	// NotBefore: no child is pushed before it; Urgent: the reason an
	// approver gave to let its children pass a closed maintenance window.
	NotBefore *time.Time `json:"not_before,omitempty"`
	Urgent    string     `json:"urgent,omitempty"`
	// ScheduleID names the schedule whose occurrence made the run.
	ScheduleID string `json:"schedule_id,omitempty"`
	// Summary lists the failed and skipped nodes (a PARTIAL or FAILED run
	// says which).
	Summary *RunSummary `json:"summary,omitempty"`
	// PausedFor says why a PAUSED run is paused, and so who goes on with
	// it: PausedManual (an operator resumes), PausedErrors (an approver
	// other than the requester resumes, forgiving the errors) or
	// PausedCanary (an approver other than the requester promotes).
	PausedFor string `json:"paused_for,omitempty"`
	// Aborting: the run was aborted and is RUNNING only to roll back the
	// nodes it started; it ends ABORTED.
	Aborting bool `json:"aborting,omitempty"`
	// Lock is the lock the run takes from its start to its end.
	Lock *Lock `json:"lock,omitempty"`
}

// ReusedNode is a node of a retry from the failed step: Steps ended DONE
// in the run retried and are not run again (their outputs are kept);
// From is the first step it runs.
type ReusedNode struct {
	NodeID string   `json:"node_id"`
	Steps  []string `json:"steps"`
	From   string   `json:"from"`
}

// Values of RetryRunRequest.From.
const (
	// RetryFromFailed re-runs each failed node from its failed step.
	RetryFromFailed = "failed"
)

// RetryRunRequest is the optional body of POST /api/v1/runs/{id}/retry:
// From "failed" re-runs each failed node from its failed step, reusing
// its DONE steps and their outputs; "" (the default) from its first step.
type RetryRunRequest struct {
	From string `json:"from,omitempty"`
}

// Why a run is PAUSED (Run.PausedFor).
const (
	PausedManual = "manual"
	PausedErrors = "errors"
	PausedCanary = "canary"
)

// RunList answers GET /api/v1/runs.
type RunList struct {
	Runs       []Run  `json:"runs"`
	NextMarker string `json:"next_marker"`
}

// RunNodeList answers GET /api/v1/runs/{id}/nodes: the grid's cells of a
// page of the run's nodes (in node order, each node's cells in stage order)
// and the marker of the next page ("" on the last).
type RunNodeList struct {
	Children   []RunChild `json:"children"`
	NextMarker string     `json:"next_marker"`
}

// MaxReason bounds the reason a person gives to a reject or a cancel.
const MaxReason = 1024

// ReasonRequest is the optional body of the calls that take a person's
// reason (reject, cancel).
type ReasonRequest struct {
	Reason string `json:"reason"`
}

// CancelRunRequest is the optional body of POST /api/v1/runs/{id}/cancel:
// a reason, and Rollback, which stops the run as an abort does (its
// started nodes roll back, and it ends ABORTED).
type CancelRunRequest struct {
	Reason   string `json:"reason"`
	Rollback bool   `json:"rollback,omitempty"`
}

// ApplyPlaybookRequest is the body of POST /api/v1/playbooks.
type ApplyPlaybookRequest struct {
	// Document is the playbook's YAML.
	Document string `json:"document"`
}

// PlaybookVersion is one stored version of a playbook.
type PlaybookVersion struct {
	Name        string    `json:"name"`
	Version     int       `json:"version"`
	Description string    `json:"description"`
	Digest      string    `json:"digest"`
	CreatedBy   string    `json:"created_by"`
	CreatedTS   time.Time `json:"created_ts"`
	// Source is "file:NAME" for a version muster apply -f NAME published,
	// absent for one applied by hand.
	Source string `json:"source,omitempty"`
}

// Playbook answers GET /api/v1/playbooks/{name} and POST /api/v1/playbooks:
// one version with its document, and the list of all versions.
type Playbook struct {
	PlaybookVersion
	Document string `json:"document"`
	// Changed is false when an apply found the document unchanged.
	Changed  bool              `json:"changed"`
	Versions []PlaybookVersion `json:"versions,omitempty"`
}

// PlaybookList answers GET /api/v1/playbooks: the newest version of each.
type PlaybookList struct {
	Playbooks []PlaybookVersion `json:"playbooks"`
}

// PlanRequest is the body of POST /api/v1/playbooks/{name}/plan and
// /runs: the cluster, the parameters as text (as given on a command line),
// and optionally a stored version (default: the newest). Plan also takes a
// Document, to plan a playbook before it is applied.
type PlanRequest struct {
	ClusterID string            `json:"cluster_id"`
	Params    map[string]string `json:"params,omitempty"`
	Version   int               `json:"version,omitempty"`
	Document  string            `json:"document,omitempty"`
	// A start names what its plan showed: Version, which must still be the
	// newest, or Digest, the plan's digest (of Version, the newest when 0),
	// which the run's plan must still have. Otherwise it is a 409.
	Digest string `json:"digest,omitempty"`
	// NotBefore: no child of the run is pushed before it. A plan with one
	// plans the run that starts then: its digest covers it, so a start
	// gives the same.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Limit keeps, of each stage's nodes, those some pattern picks (node
	// ids, or globs over them); empty: every node. Each pattern must pick a
	// node of the cluster and each stage keep one. The plan's digest covers
	// the nodes kept, so a start gives the same limit as its plan.
	Limit []string `json:"limit,omitempty"`
}

// PlanChild is one child action a plan would create.
type PlanChild struct {
	Stage  string `json:"stage"`
	Wave   int    `json:"wave"`
	NodeID string `json:"node_id"`
	// Step is the step of a stage with steps (one child per step of each
	// node, in order, then its rollback steps; retries are the step's), When
	// its when.
	Step string          `json:"step,omitempty"`
	When string          `json:"when,omitempty"`
	Kind string          `json:"kind"`
	Args json.RawMessage `json:"args"`
	// Rollback marks a rollback step of the node: it runs only if the node
	// fails, after its steps with when "always".
	Rollback bool `json:"rollback,omitempty"`
	// Canary marks the children of the stage's canary nodes: once they are
	// done the run pauses until an approver promotes it; CanaryPause marks
	// the last child of the last canary node, where that pause falls.
	Canary      bool `json:"canary,omitempty"`
	CanaryPause bool `json:"canary_pause,omitempty"`
	// Held says why the disruption budget would hold this child back now
	// (empty when it would go).
	Held string `json:"held,omitempty"`
}

// Plan is what starting a playbook would do: the run's stages, resolved, and
// every child action by stage and wave, created nothing.
type Plan struct {
	Playbook  string         `json:"playbook"`
	Version   int            `json:"version"`
	ClusterID string         `json:"cluster_id"`
	Params    map[string]any `json:"params"`
	// Digest is what approving the run will approve.
	Digest string `json:"digest"`
	// NotBefore and Limit are the request's, which the digest covers.
	NotBefore *time.Time  `json:"not_before,omitempty"`
	Limit     []string    `json:"limit,omitempty"`
	Stages    []Stage     `json:"stages"`
	Children  []PlanChild `json:"children"`
	// Lock is the lock the run would take from its start to its end.
	Lock *Lock `json:"lock,omitempty"`
}

// ApproveRunRequest is the optional body of POST /api/v1/runs/{id}/approve:
// the digest the approver was shown. When given, the approval holds only if
// it is still the run's digest.
type ApproveRunRequest struct {
	Digest string `json:"digest"`
}
