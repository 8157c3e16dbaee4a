package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// VersionRef is a playbook version as a schedule names it: a number, or
// "latest" (0), which follows the newest version (each new one sent back to
// approval). In JSON it is a number or the string "latest".
type VersionRef int

// Latest is the VersionRef that follows the newest version.
const Latest VersionRef = 0

// MarshalJSON writes "latest" or the number.
func (v VersionRef) MarshalJSON() ([]byte, error) {
	if v == Latest {
		return []byte(`"latest"`), nil
	}
	return []byte(strconv.Itoa(int(v))), nil
}

// UnmarshalJSON reads a positive number, a number as a string, or "latest".
func (v *VersionRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	ref, err := ParseVersionRef(s)
	if err != nil {
		return err
	}
	*v = ref
	return nil
}

// String is "latest" or the number.
func (v VersionRef) String() string {
	if v == Latest {
		return "latest"
	}
	return strconv.Itoa(int(v))
}

// ParseVersionRef reads "latest" (or "") or a positive number.
func ParseVersionRef(s string) (VersionRef, error) {
	if s == "" || s == "latest" || s == "null" {
		return Latest, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1<<30 {
		return 0, fmt.Errorf("version %q: want a positive number or \"latest\"", s)
	}
	return VersionRef(n), nil
}

// CreateScheduleRequest is the body of POST /api/v1/schedules: a new
// schedule, or a change to the schedule of that name (which sends it back
// to approval).
type CreateScheduleRequest struct {
	Name     string            `json:"name"`
	Cluster  string            `json:"cluster"`
	Playbook string            `json:"playbook"`
	Version  VersionRef        `json:"version"`
	Params   map[string]string `json:"params,omitempty"`
	Cron     string            `json:"cron"`
	Timezone string            `json:"timezone,omitempty"`
	// Concurrency is "forbid" (the default) or "allow".
	Concurrency string `json:"concurrency,omitempty"`
	// CatchUp is a duration such as "10m" (the default): the most recent
	// occurrence missed while no core ran is still run if it is less than
	// this old. "0s" runs none late.
	CatchUp string `json:"catch_up,omitempty"`
}

// ApproveScheduleRequest is the optional body of an approval: the digest
// the approver was shown (a 409 when the schedule's is another).
type ApproveScheduleRequest struct {
	Digest string `json:"digest,omitempty"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Cluster  string            `json:"cluster"`
	Playbook string            `json:"playbook"`
	Version  VersionRef        `json:"version"`
	Params   map[string]string `json:"params"`
	Cron     string            `json:"cron"`
	// CronWords says Cron in words ("at 02:00 every day"), when it has a
	// common shape.
	CronWords   string `json:"cron_words,omitempty"`
	Timezone    string `json:"timezone"`
	Concurrency string `json:"concurrency"`
	CatchUp     string `json:"catch_up"`
	State       string `json:"state"`
	StateReason string `json:"state_reason"`
	Requester   string `json:"requester"`
	// Digest covers all of the schedule and the playbook version it runs.
	Digest string `json:"digest"`
	// PlaybookVersion is the version the schedule resolves to now.
	PlaybookVersion int    `json:"playbook_version"`
	ApprovedBy      string `json:"approved_by,omitempty"`
	// ApprovedVersion is the playbook version its runs are made from.
	ApprovedVersion int        `json:"approved_version,omitempty"`
	ActiveSince     *time.Time `json:"active_since,omitempty"`
	LastOccurrence  *time.Time `json:"last_occurrence,omitempty"`
	// Next lists the next occurrences (while ACTIVE).
	Next      []time.Time `json:"next"`
	CreatedTS time.Time   `json:"created_ts"`
	UpdatedTS time.Time   `json:"updated_ts"`
	// Source is "file:NAME" for a schedule muster apply -f NAME made or
	// last changed, absent for one made or changed by hand.
	Source string `json:"source,omitempty"`
	// Outcome answers POST /api/v1/schedules: created, changed (back to
	// approval) or unchanged.
	Outcome string `json:"outcome,omitempty"`
	// LastRun is the schedule's newest run and its state (none yet: nil).
	LastRun *ScheduleRun `json:"last_run,omitempty"`
	// Runs lists the schedule's newest runs, only in GET /api/v1/schedules/{name}.
	Runs []ScheduleRun `json:"runs,omitempty"`
	// Approval is where its approval stands while it waits for one.
	Approval *Approval `json:"approval,omitempty"`
}

// ScheduleRun is one run of a schedule.
type ScheduleRun struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	CreatedTS time.Time `json:"created_ts"`
}

// ScheduleList answers GET /api/v1/schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
	// NextMarker is the marker of the next page ("" on the last).
	NextMarker string `json:"next_marker"`
}
