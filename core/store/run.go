package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/musterhq/muster/shared/action"

	"github.com/musterhq/muster/shared/limit"
)

// Run states (docs/architecture.md, "Runs and playbooks"): PENDING_APPROVE →
// RUNNING ⇄ PAUSED → DONE | PARTIAL | FAILED | CANCELLED | ABORTED.
const (
	RunPendingApprove = "PENDING_APPROVE"
	RunRunning        = "RUNNING"
	RunPaused         = "PAUSED"
	RunDone           = "DONE"
	RunFailed         = "FAILED"
	// RunPartial: finished within every stage's max_errors, with nodes
	// that failed or were skipped (listed in the stages' summary).
	RunPartial   = "PARTIAL"
	RunCancelled = "CANCELLED"
	// RunAborted: someone aborted it (an approver or its requester, or an
	// operator's cancel with rollback) and its started nodes rolled back.
	RunAborted = "ABORTED"
)

// RunStates are the run states, in the order of their life.
var RunStates = []string{RunPendingApprove, RunRunning, RunPaused, RunDone, RunPartial, RunFailed, RunCancelled, RunAborted}

// RunFinal reports whether a run in state s can no longer change.
func RunFinal(s string) bool {
	return s == RunDone || s == RunFailed || s == RunCancelled || s == RunPartial || s == RunAborted
}

// Stage states: PENDING until its dependencies are DONE, then RUNNING, then
// DONE or FAILED, or ABORTED once its run's abort rolled it back. StagePaused is never stored: a RUNNING stage of a PAUSED
// run is shown PAUSED (runs.View), as it starts nothing new until the run
// goes on.
const (
	StagePending = "PENDING"
	StageRunning = "RUNNING"
	StageDone    = "DONE"
	StageFailed  = "FAILED"
	StagePaused  = "PAUSED"
	StageAborted = "ABORTED"
)

// Run is a run as the core keeps it.
type Run struct {
	ID              string
	ClusterID       string
	State           string
	StateReason     string
	Requester       string
	ApprovedBy      string
	Playbook        string
	PlaybookVersion int
	// Digest covers what is approved: the cluster and every stage's kind,
	// args, resolved nodes and limits.
	Digest     string
	Stages     []RunStage
	CreatedTS  time.Time
	UpdatedTS  time.Time
	FinishedTS *time.Time
	// RetryOf is the run whose failed and skipped nodes this run retries.
	RetryOf string
	// DeadlineS is the run's deadline, counted from when it starts
	// running (0: none); DeadlineTS is that moment, once it started.
	DeadlineS  int
	DeadlineTS *time.Time
	// NotBefore: no child of the run is pushed before it (nil: none).
	NotBefore *time.Time
	// Urgent is the reason an approver gave to let the run's children pass
	// a closed maintenance window, never a freeze ("" when not urgent).
	Urgent string
	// ScheduleID is the schedule whose occurrence made the run ("" for
	// a run started by a person).
	ScheduleID string
	// Lock is the lock the run takes for its whole life (nil: none):
	// another run taking it waits until this one ends.
	Lock *Lock
	// Brief: the run was read by a list with RunQuery.Brief, and each
	// stage's Nodes holds at most its first BriefNodes nodes (NodeCount
	// counts them all). A brief run is for showing: it cannot be stored.
	Brief bool
}

// BriefNodes is how many of a stage's nodes a brief run holds.
const BriefNodes = 10

// RunStage is one stage of a stored run: its spec, resolved, and its state.
type RunStage struct {
	Name           string          `json:"name"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	Target         Target          `json:"target"`
	Nodes          []string        `json:"nodes"`
	MaxConcurrency limit.Limit     `json:"max_concurrency"`
	MaxErrors      limit.Limit     `json:"max_errors"`
	OnFailure      string          `json:"on_failure"`
	DependsOn      []string        `json:"depends_on"`
	TimeoutS       int             `json:"timeout_s,omitempty"`
	State          string          `json:"state"`
	// Forgiven counts the errors a resume accepted after the stage paused
	// the run on them: only errors beyond these count against MaxErrors.
	Forgiven int `json:"forgiven,omitempty"`
	// ForgivenBy records each resume that forgave the stage's errors:
	// "forgiven by bob: the disk was full, cleaned".
	ForgivenBy []string `json:"forgiven_by,omitempty"`
	// Steps is the stage's procedure, node first; empty for a one-step
	// stage of Kind and Args (Procedure gives the steps either way).
	Steps []RunStep `json:"steps,omitempty"`
	// Rollback runs on a node whose procedure failed.
	Rollback []RunStep `json:"rollback,omitempty"`
	// Failed and Skipped list the nodes that failed, and those skipped,
	// as the run's last advance found them: the run's summary.
	Failed  []string `json:"failed,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Why says why a failed node failed (its first MaxWhy failed nodes):
	// its failed step, the child's reason and the last lines of its output.
	Why map[string]NodeFailure `json:"why,omitempty"`
	// Done, InFlight (neither failed nor skipped) and RolledBack count the
	// stage's nodes so, as the run's last advance found them: with Failed
	// and Skipped, its progress in nodes.
	Done       int `json:"done,omitempty"`
	InFlight   int `json:"in_flight,omitempty"`
	RolledBack int `json:"rolled_back,omitempty"`
	// Canary, SoakS, Unavailable and UnavailableTimeoutS are the spec's
	// (wire.StageSpec); Promoted records the canary's promotion.
	Canary              int    `json:"canary,omitempty"`
	Promoted            bool   `json:"promoted,omitempty"`
	PromotedBy          string `json:"promoted_by,omitempty"`
	SoakS               int    `json:"soak_s,omitempty"`
	Unavailable         string `json:"unavailable,omitempty"`
	UnavailableTimeoutS int    `json:"unavailable_timeout_s,omitempty"`
	// IncludeFailed runs the stage on nodes that failed an earlier stage;
	// without it they are skipped.
	IncludeFailed bool `json:"include_failed,omitempty"`
	// Follow: the stage targets labels and takes the nodes that join the
	// cluster with them while it runs; Joined lists those it took, in the
	// order they joined (they are in Nodes too).
	Follow bool     `json:"follow,omitempty"`
	Joined []string `json:"joined,omitempty"`
	// Lock is the lock the stage takes while it runs (nil: none).
	Lock *Lock `json:"lock,omitempty"`
	// KindLocks are the locks the kinds of its steps declare (the core's
	// kinds: configuration when the run was planned), each with the kinds
	// declaring it, Lock left out: the stage takes them with Lock, all or
	// none, while it runs (Locks).
	KindLocks []KindLock `json:"kind_locks,omitempty"`
	// Reuse holds, by node, the steps a retry from the failed step takes
	// as done (with their outputs) instead of running them again.
	Reuse map[string][]ReusedStep `json:"reuse,omitempty"`
	// AutoPromoteAfterS and AbortOn are the spec's (wire.StageSpec).
	AutoPromoteAfterS int      `json:"auto_promote_after_s,omitempty"`
	AbortOn           []string `json:"abort_on,omitempty"`
	// Core holds, by node, the latest attempt of each of its gates and
	// calls (CoreStep).
	Core map[string][]CoreStep `json:"core,omitempty"`
	// HeldSince is when the canary's gates were last found all passing
	// while it waited for a promote, unbroken since (auto_promote_after_s
	// counts from it); nil when they are not.
	HeldSince *time.Time `json:"held_since,omitempty"`
	// Aborted: the run was aborted while the stage ran; its started
	// nodes end their procedure as a failed node's (when: always steps,
	// then the rollback) and the stage ends ABORTED.
	Aborted bool `json:"aborted,omitempty"`
	// Unreachable records, by node, what the planner decided of a node
	// that was DOWN or drained at its turn: "fail", "skip", or when it
	// started waiting ("wait" with Since).
	Unreachable map[string]Unreachable `json:"unreachable,omitempty"`
	// NodeCount counts the stage's nodes in a brief run (Run.Brief), whose
	// Nodes holds only the first of them; it is 0 otherwise. Size counts
	// them either way.
	NodeCount int `json:"node_count,omitempty"`
	// FailedCount and SkippedCount count Failed and Skipped in a brief
	// run, whose lists hold only their first BriefNodes; 0 otherwise.
	// FailedN and SkippedN count them either way.
	FailedCount  int `json:"failed_count,omitempty"`
	SkippedCount int `json:"skipped_count,omitempty"`
}

// FailedN is how many nodes of the stage failed, in a brief run as in a
// full one.
func (s *RunStage) FailedN() int { return max(s.FailedCount, len(s.Failed)) }

// SkippedN is how many nodes the stage skipped, in a brief run as in a
// full one.
func (s *RunStage) SkippedN() int { return max(s.SkippedCount, len(s.Skipped)) }

// MaxWhy bounds the failed nodes of a stage whose reason a run keeps
// (RunStage.Why).
const MaxWhy = 20

// NodeFailure is why a node failed its stage: the step and attempt, the
// reason of the child that failed it (ActionID; none when the node failed
// without a child, unavailable at its turn), and the last lines of that
// child's output, bounded.
type NodeFailure struct {
	Reason   string `json:"reason"`
	ActionID string `json:"action_id,omitempty"`
	Output   string `json:"output,omitempty"`
}

// RunStep is one step of a stage's procedure.
type RunStep struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args"`
	TimeoutS int             `json:"timeout_s,omitempty"`
	Retry    *Retry          `json:"retry,omitempty"`
	When     string          `json:"when,omitempty"`
	// SoakS keeps a gate (a step of kind core/gate) under watch this long
	// after it first passes.
	SoakS int `json:"soak_s,omitempty"`
}

// CoreStep is the latest attempt of a gate or a call the core runs for a
// node (a step of kind core/gate or core/call): stored in the run's row,
// the planner reads it as it reads a child.
type CoreStep struct {
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	// State is PENDING (to evaluate), RUNNING (a gate under its soak),
	// DONE or FAILED.
	State string `json:"state"`
	// Args are the step's args rendered for the node (secrets as
	// references, never values).
	Args json.RawMessage `json:"args,omitempty"`
	// Value is what the core saw last, Reason its verdict's words.
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Checks counts the evaluations until the attempt ended; a watched
	// gate of a canary waiting for its promote counts then only those
	// that saw another value (one that sees the same writes nothing).
	Checks int `json:"checks,omitempty"`
	// Created is when the attempt was admitted, At the last evaluation
	// counted in Checks, Passed when a gate first passed (its soak counts
	// from it), Finished when it ended.
	Created  time.Time  `json:"created"`
	At       *time.Time `json:"at,omitempty"`
	Passed   *time.Time `json:"passed,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
}

// ReusedStep is a step a node of a retry from the failed step does not
// run again: it ended DONE in the run retried (ActionID), with Outputs.
type ReusedStep struct {
	Step     string          `json:"step"`
	ActionID string          `json:"action_id"`
	Outputs  json.RawMessage `json:"outputs,omitempty"`
}

// Unreachable is what became of a node DOWN or drained at its turn.
type Unreachable struct {
	As    string    `json:"as"`
	Since time.Time `json:"since"`
}

// Retry is how a failed step is tried again (wire.Retry).
type Retry struct {
	Attempts  int     `json:"attempts"`
	DelayS    int     `json:"delay_s,omitempty"`
	Backoff   float64 `json:"backoff,omitempty"`
	MaxDelayS int     `json:"max_delay_s,omitempty"`
}

// Procedure is the steps every node of the stage goes through: its Steps,
// or the one unnamed step of its Kind, Args and TimeoutS.
func (s *RunStage) Procedure() []RunStep {
	if len(s.Steps) > 0 {
		return s.Steps
	}
	return []RunStep{{Kind: s.Kind, Args: s.Args, TimeoutS: s.TimeoutS}}
}

// Kinds are the kinds of the stage's steps, its rollback included, in
// order (budget.Policy.Procedure decides from them whether its nodes go
// through it as one unavailability).
func (s *RunStage) Kinds() []string {
	var kinds []string
	for _, sp := range append(slices.Clone(s.Procedure()), s.Rollback...) {
		kinds = append(kinds, sp.Kind)
	}
	return kinds
}

// Attempts is how many times step may be tried in all (at least 1).
func (s *RunStep) Attempts() int {
	if s.Retry == nil || s.Retry.Attempts < 1 {
		return 1
	}
	return s.Retry.Attempts
}

// Size is how many nodes the stage has, in a brief run as in a full one.
func (s *RunStage) Size() int {
	return max(s.NodeCount, len(s.Nodes))
}

// Brief returns stages with each stage's node lists (its nodes, failed
// and skipped) cut to their first BriefNodes nodes and their counts set:
// what a brief run holds.
func Brief(stages []RunStage) []RunStage {
	out := make([]RunStage, len(stages))
	for i, st := range stages {
		st.NodeCount, st.FailedCount, st.SkippedCount = st.Size(), st.FailedN(), st.SkippedN()
		st.Nodes = st.Nodes[:min(len(st.Nodes), BriefNodes)]
		st.Failed = st.Failed[:min(len(st.Failed), BriefNodes)]
		st.Skipped = st.Skipped[:min(len(st.Skipped), BriefNodes)]
		st.Why, st.Core = nil, nil
		out[i] = st
	}
	return out
}

// ErrBriefRun is the error of storing a brief run (Run.Brief): its node
// lists are cut.
var ErrBriefRun = errors.New("a brief run cannot be stored")

// MarshalStages is what both stores keep of r's stages: the stages as JSON,
// and the brief stages (Brief) as JSON. A brief run is refused.
func MarshalStages(r *Run) (stages, brief string, err error) {
	if r.Brief {
		return "", "", fmt.Errorf("run %s: %w", r.ID, ErrBriefRun)
	}
	full, err := json.Marshal(r.Stages)
	if err != nil {
		return "", "", fmt.Errorf("run %s: stages: %w", r.ID, err)
	}
	short, err := json.Marshal(Brief(r.Stages))
	if err != nil {
		return "", "", fmt.Errorf("run %s: stages: %w", r.ID, err)
	}
	return string(full), string(short), nil
}

// ChildCount is how many children of a run's stage are in one state with
// one approver and, for CANCELLED children only, one state reason (what
// tells a run's own cancel from an error). The store keeps these counts
// with the children, so a list of runs reads them without the children.
type ChildCount struct {
	RunID      string
	Stage      string
	State      action.State
	ApprovedBy string
	// Reason is the state reason of CANCELLED children, "" for the others.
	Reason string
	N      int
}

// CountChildren counts children as the store's counts do
// (Reader.RunChildCounts): by run, stage, state, approver and reason, in
// that order.
func CountChildren(children []Record) []ChildCount {
	idx := map[ChildCount]int{}
	var out []ChildCount
	for i := range children {
		c := &children[i]
		if c.RunID == "" {
			continue
		}
		k := ChildCount{RunID: c.RunID, Stage: c.Stage, State: c.State, ApprovedBy: c.ApprovedBy}
		if c.State == action.Cancelled {
			k.Reason = c.StateReason
		}
		if j, ok := idx[k]; ok {
			out[j].N++
			continue
		}
		idx[k] = len(out)
		k.N = 1
		out = append(out, k)
	}
	SortChildCounts(out)
	return out
}

// CountsByRun groups counts by run id.
func CountsByRun(cs []ChildCount) map[string][]ChildCount {
	out := map[string][]ChildCount{}
	for _, c := range cs {
		out[c.RunID] = append(out[c.RunID], c)
	}
	return out
}

// RunExists reports whether a run has exactly this id, without reading it.
func RunExists(ctx context.Context, r Reader, id string) (bool, error) {
	ids, err := r.RunIDsWithPrefix(ctx, id, 1)
	return len(ids) == 1 && ids[0] == id, err
}

// SortChildCounts puts counts in the order RunChildCounts returns them.
func SortChildCounts(cs []ChildCount) {
	slices.SortFunc(cs, func(a, b ChildCount) int {
		return cmp.Or(cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.State, b.State),
			cmp.Compare(a.ApprovedBy, b.ApprovedBy), cmp.Compare(a.Reason, b.Reason))
	})
}

// Target is the node selection a stage was created with, as the store keeps
// it (the stages column's JSON): the API's wire.Target converts to it field
// for field at the API boundary (core/runs).
type Target struct {
	Nodes  []string          `json:"nodes,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	All    bool              `json:"all,omitempty"`
}

// RunQuery selects runs, newest first. Empty fields do not filter.
type RunQuery struct {
	ClusterID string
	// ClusterIn, when not nil, keeps the runs of these clusters only
	// (none when empty): the clusters a caller may read.
	ClusterIn []string
	States    []string
	// Marker is the id of the last run of the previous page.
	Marker string
	Limit  int
	// Oldest lists oldest first (then by id) instead of newest first.
	Oldest bool
	// Brief reads each stage's first BriefNodes nodes and its count, not
	// its whole node list (Run.Brief): for lists, whose cost then does not
	// grow with the size of the runs.
	Brief bool
}

// Run event types (docs/architecture.md, "Runs and playbooks").
const (
	EventRunCreated  = "run.created"
	EventRunApproved = "run.approved"
	// EventRunApprovalRecorded: one approval of a run, its resume past
	// errors or its canary's promote took, and more are needed.
	EventRunApprovalRecorded = "run.approval_recorded"
	EventRunRejected         = "run.rejected"
	EventRunExpired          = "run.expired"
	EventRunStageStarted     = "run.stage_started"
	EventRunStageFinished    = "run.stage_finished"
	EventRunPaused           = "run.paused"
	EventRunResumed          = "run.resumed"
	EventRunCancelled        = "run.cancelled"
	EventRunFinished         = "run.finished"
	// EventRunNodeJoined: a node that joined the cluster with the labels
	// of a running stage with follow was added to it.
	EventRunNodeJoined = "run.node_joined"
	// EventRunNodeUnavailable: a node was DOWN or drained at its turn.
	EventRunNodeUnavailable = "run.node_unavailable"
	// EventRunPromoted: an approver promoted a run's canary.
	EventRunPromoted = "run.promoted"
	// EventRunAborted: someone aborted a run: its started nodes roll back,
	// then it ends ABORTED (run.finished).
	EventRunAborted = "run.aborted"
	// EventRunCoreStep: an attempt of a gate or a call the core ran for a
	// node ended: the value seen and the verdict.
	EventRunCoreStep = "run.core_step"
	// EventRunUrgent: an approver marked a run urgent, with a reason: its
	// children pass a closed maintenance window, never a freeze.
	EventRunUrgent = "run.urgent"
)

// Playbook is one stored version of a playbook.
type Playbook struct {
	Name        string
	Version     int
	Description string
	// Document is the YAML as applied.
	Document  string
	Digest    string
	CreatedBy string
	CreatedTS time.Time
	// Source is "file:NAME" for a version muster apply -f NAME made, ""
	// for one applied by hand.
	Source string
}

// Playbook event types.
const EventPlaybookApplied = "playbook.applied"
