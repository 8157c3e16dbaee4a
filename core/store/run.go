package store

import (
	"encoding/json"
	"time"

	"github.com/musterhq/muster/shared/limit"
)

// Run states (docs/architecture.md, "Runs and playbooks"): PENDING_APPROVE →
// RUNNING ⇄ PAUSED → DONE | FAILED | CANCELLED.
const (
	RunPendingApprove = "PENDING_APPROVE"
	RunRunning        = "RUNNING"
	RunPaused         = "PAUSED"
	RunDone           = "DONE"
	RunFailed         = "FAILED"
	RunCancelled      = "CANCELLED"
)

// RunFinal reports whether a run in state s can no longer change.
func RunFinal(s string) bool { return s == RunDone || s == RunFailed || s == RunCancelled }

// Stage states: PENDING until its dependencies are DONE, then RUNNING, then
// DONE or FAILED.
const (
	StagePending = "PENDING"
	StageRunning = "RUNNING"
	StageDone    = "DONE"
	StageFailed  = "FAILED"
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
}

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
	States    []string
	// Marker is the id of the last run of the previous page.
	Marker string
	Limit  int
}

// Run event types (docs/architecture.md, "Runs and playbooks").
const (
	EventRunCreated       = "run.created"
	EventRunApproved      = "run.approved"
	EventRunRejected      = "run.rejected"
	EventRunExpired       = "run.expired"
	EventRunStageStarted  = "run.stage_started"
	EventRunStageFinished = "run.stage_finished"
	EventRunPaused        = "run.paused"
	EventRunResumed       = "run.resumed"
	EventRunCancelled     = "run.cancelled"
	EventRunFinished      = "run.finished"
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
}

// Playbook event types.
const EventPlaybookApplied = "playbook.applied"
