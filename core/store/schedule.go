package store

import (
	"encoding/json"
	"time"
)

// Schedule states (docs/architecture.md, "Windows and schedules"):
// PENDING_APPROVE → ACTIVE ⇄ PAUSED; PENDING_APPROVE → REJECTED. A change
// to the schedule, or a new version of its playbook under `latest`, sends
// it back to PENDING_APPROVE.
const (
	SchedulePendingApprove = "PENDING_APPROVE"
	ScheduleActive         = "ACTIVE"
	SchedulePaused         = "PAUSED"
	ScheduleRejected       = "REJECTED"
)

// Values of a schedule's concurrency.
const (
	ConcurrencyForbid = "forbid"
	ConcurrencyAllow  = "allow"
)

// Schedule is a recurring, approved-once start of a playbook.
type Schedule struct {
	// ID is fixed at creation: the runs of a schedule deleted and created
	// again under the same name get other ids.
	ID        string
	Name      string
	ClusterID string
	Playbook  string
	// Version is the playbook version, 0 for `latest`.
	Version int
	// Params are the playbook's parameters, a JSON object.
	Params      json.RawMessage
	Cron        string
	Timezone    string
	Concurrency string
	// CatchUpS: an occurrence missed while no core ran is still run if it
	// is less than this old (the most recent one only).
	CatchUpS    int
	State       string
	StateReason string
	// Requester created the schedule or made its last change.
	Requester string
	// Digest covers all of the schedule and the playbook version it
	// resolves to (core/schedule.Digest), as of its last change.
	Digest string
	// ApprovedBy, ApprovedDigest and ApprovedVersion are what the last
	// approval signed: the approver, the digest and the playbook version
	// its runs are made from.
	ApprovedBy      string
	ApprovedDigest  string
	ApprovedVersion int
	// ActiveSince is when it was last approved or resumed: earlier
	// occurrences are never run.
	ActiveSince *time.Time
	// LastOccurrence is the latest occurrence handled (a run made, or
	// skipped), so that no replica handles it twice.
	LastOccurrence *time.Time
	CreatedTS      time.Time
	UpdatedTS      time.Time
	// Source is "file:NAME" for a schedule muster apply -f NAME made or
	// last changed, "" for one made or changed by hand.
	Source string
}

// Schedule event types.
const (
	EventScheduleCreated  = "schedule.created"
	EventScheduleChanged  = "schedule.changed"
	EventScheduleApproved = "schedule.approved"
	// EventScheduleApprovalRecorded: one approval of a schedule took, and
	// more are needed.
	EventScheduleApprovalRecorded = "schedule.approval_recorded"
	EventScheduleRejected         = "schedule.rejected"
	EventSchedulePaused           = "schedule.paused"
	EventScheduleResumed          = "schedule.resumed"
	EventScheduleDeleted          = "schedule.deleted"
	// EventScheduleUnapproved: a new version of the playbook under
	// `latest` sent the schedule back to approval.
	EventScheduleUnapproved = "schedule.unapproved"
	// EventScheduleOccurrence: an occurrence created its run.
	EventScheduleOccurrence = "schedule.occurrence"
	// EventScheduleSkipped: an occurrence made no run (concurrency:
	// forbid with the previous run open, or a plan that failed).
	EventScheduleSkipped = "schedule.skipped"
)
