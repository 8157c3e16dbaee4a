package wire

import "github.com/musterhq/muster/shared/action"

// Approval is where the approval of an action, a run (its approval, its
// resume past errors or its canary's promote) or a schedule stands, level
// by level (docs/runs-and-playbooks.md, "Approval levels"). Every level
// must be met.
type Approval struct {
	// Subject is what is approved: action, run, schedule, resume or promote.
	Subject   string          `json:"subject"`
	Levels    []ApprovalLevel `json:"levels"`
	Satisfied bool            `json:"satisfied"`
	// Void counts approvals of content since changed: they count for nothing.
	Void int `json:"void,omitempty"`
	// Missing says what the levels not met still need: "1 more from sre";
	// "nothing more" when all are met.
	Missing string `json:"missing"`
	// Lines are the levels in words, one a level, as `muster … show` prints them.
	Lines []string `json:"lines"`
}

// ApprovalLevel is one level: Min distinct people, members of Teams or
// among Persons (neither: any approver on the cluster).
type ApprovalLevel struct {
	Teams      []string `json:"teams"`
	Persons    []string `json:"persons"`
	Min        int      `json:"min"`
	ApprovedBy []string `json:"approved_by"`
	Remaining  int      `json:"remaining"`
	// CanApprove names who may still approve at this level; empty when it
	// is met, or when anyone holding approve on the cluster may
	// (AnyApprover).
	CanApprove  []string `json:"can_approve"`
	AnyApprover bool     `json:"any_approver,omitempty"`
}

// ActionView is an action as GET /api/v1/actions/{id} and its decisions
// show it: with its approval while it waits for one.
type ActionView struct {
	action.Action
	Approval *Approval `json:"approval,omitempty"`
}
