package wire

import (
	"encoding/json"
	"time"
)

// Policy records (docs/policy-as-data.md): maintenance windows, disruption
// budgets and approval rules kept in the core's store with their history.

// Kinds of policy records: the {kind} of /api/v1/policies/{kind}/{id}.
const (
	KindWindow       = "window"
	KindBudget       = "budget"
	KindApprovalRule = "approval_rule"
)

// WindowSpec is a maintenance window record's spec: it opens at every
// occurrence of Cron in Timezone (UTC when empty) for Duration ("4h").
type WindowSpec struct {
	Cluster  string `json:"cluster"`
	Cron     string `json:"cron"`
	Duration string `json:"duration"`
	Timezone string `json:"timezone,omitempty"`
}

// BudgetSpec is a disruption budget record's spec (its id is the
// cluster's): a count ("1") or a percentage ("10%") of the cluster's nodes.
type BudgetSpec struct {
	Cluster        string `json:"cluster"`
	MaxUnavailable string `json:"max_unavailable"`
}

// ApprovalRuleSpec is an approval rule record's spec: the rules match work
// in the order of Position (then id); the first that matches decides.
type ApprovalRuleSpec struct {
	Position int         `json:"position"`
	Kind     string      `json:"kind,omitempty"`
	Cluster  string      `json:"cluster,omitempty"`
	Approval string      `json:"approval,omitempty"`
	Levels   []RuleLevel `json:"levels,omitempty"`
}

// RuleLevel is one level of an approval rule: Min (0: 1) distinct
// people from Teams or Persons.
type RuleLevel struct {
	Teams   []string `json:"teams,omitempty" yaml:"teams"`
	Persons []string `json:"persons,omitempty" yaml:"persons"`
	Min     int      `json:"min,omitempty" yaml:"min"`
}

// PolicyRecord is a stored policy record as the API shows it.
type PolicyRecord struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	ClusterID string          `json:"cluster_id,omitempty"`
	Spec      json.RawMessage `json:"spec"`
	// Source is "" (the API or the web UI), "config" (core.yaml) or
	// "file:NAME" (muster apply -f NAME).
	Source       string     `json:"source,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Version      int        `json:"version"`
	CreatedBy    string     `json:"created_by"`
	CreatedTS    time.Time  `json:"created_ts"`
	UpdatedBy    string     `json:"updated_by"`
	UpdatedTS    time.Time  `json:"updated_ts"`
	DeletedTS    *time.Time `json:"deleted_ts,omitempty"`
	DeletedBy    string     `json:"deleted_by,omitempty"`
	DeleteReason string     `json:"delete_reason,omitempty"`
}

// PolicyRecordList is the answer of GET /api/v1/policies.
type PolicyRecordList struct {
	Policies []PolicyRecord `json:"policies"`
}

// PutPolicyRequest is the body of PUT /api/v1/policies/{kind}/{id}: the
// record's spec (WindowSpec, BudgetSpec or ApprovalRuleSpec) and why.
type PutPolicyRequest struct {
	Spec   json.RawMessage `json:"spec"`
	Reason string          `json:"reason"`
}

// DeletePolicyRequest is the body of POST
// /api/v1/policies/{kind}/{id}/delete.
type DeletePolicyRequest struct {
	Reason string `json:"reason"`
}

// PolicyChange is one change of a policy record's history.
type PolicyChange struct {
	Version int             `json:"version"`
	Op      string          `json:"op"`
	Spec    json.RawMessage `json:"spec"`
	Source  string          `json:"source,omitempty"`
	Actor   string          `json:"actor"`
	Reason  string          `json:"reason,omitempty"`
	TS      time.Time       `json:"ts"`
}

// PolicyHistory is the answer of GET /api/v1/policies/{kind}/{id}/history.
type PolicyHistory struct {
	Changes []PolicyChange `json:"changes"`
}

// PolicyDocument is a policy file (muster apply -f): what it declares of
// each kind. A kind left out declares none: the records a former apply of
// the same file made of it are deleted (freezes lifted), but for playbooks,
// whose versions are kept. Playbooks and schedules are read from a file by
// the CLI's own decoder (a playbook's document may be a file's path there).
type PolicyDocument struct {
	Freezes       []PolicyFreeze       `json:"freezes,omitempty" yaml:"freezes"`
	Windows       []PolicyWindow       `json:"windows,omitempty" yaml:"windows"`
	Budgets       []PolicyBudget       `json:"budgets,omitempty" yaml:"budgets"`
	ApprovalRules []PolicyApprovalRule `json:"approval_rules,omitempty" yaml:"approval_rules"`
	Teams         []PolicyTeam         `json:"teams,omitempty" yaml:"teams"`
	Grants        []PolicyGrant        `json:"grants,omitempty" yaml:"grants"`
	Playbooks     []PolicyPlaybook     `json:"playbooks,omitempty" yaml:"-"`
	Schedules     []PolicySchedule     `json:"schedules,omitempty" yaml:"-"`
}

// PolicyPlaybook is a declared playbook: its name and its document (the
// YAML muster playbook apply takes; a file's playbook named by path is
// read by the CLI and sent here).
type PolicyPlaybook struct {
	Name     string `json:"name"`
	Document string `json:"document"`
}

// PolicySchedule is a declared schedule: what POST /api/v1/schedules
// takes.
type PolicySchedule = CreateScheduleRequest

// PolicyTeam is a declared team: its members and the group claims that
// mean membership.
type PolicyTeam struct {
	Name    string   `json:"name" yaml:"name"`
	Members []string `json:"members,omitempty" yaml:"members"`
	Groups  []string `json:"groups,omitempty" yaml:"groups"`
}

// PolicyGrant is a declared grant: a team or a person (one), a role, and a
// cluster glob or a label selector (one).
type PolicyGrant struct {
	Team     string            `json:"team,omitempty" yaml:"team"`
	Person   string            `json:"person,omitempty" yaml:"person"`
	Role     string            `json:"role" yaml:"role"`
	Clusters string            `json:"clusters,omitempty" yaml:"clusters"`
	Labels   map[string]string `json:"labels,omitempty" yaml:"labels"`
}

// PolicyFreeze is a declared freeze: RFC 3339 times.
type PolicyFreeze struct {
	Cluster string    `json:"cluster" yaml:"cluster"`
	From    time.Time `json:"from" yaml:"from"`
	To      time.Time `json:"to" yaml:"to"`
	Reason  string    `json:"reason" yaml:"reason"`
}

// PolicyWindow is a declared maintenance window, named.
type PolicyWindow struct {
	Name     string `json:"name" yaml:"name"`
	Cluster  string `json:"cluster" yaml:"cluster"`
	Cron     string `json:"cron" yaml:"cron"`
	Duration string `json:"duration" yaml:"duration"`
	Timezone string `json:"timezone,omitempty" yaml:"timezone"`
}

// PolicyBudget is a declared disruption budget of a cluster.
type PolicyBudget struct {
	Cluster        string `json:"cluster" yaml:"cluster"`
	MaxUnavailable string `json:"max_unavailable" yaml:"max_unavailable"`
}

// PolicyApprovalRule is a declared approval rule, named; the file's order
// is the rules' order.
type PolicyApprovalRule struct {
	Name     string      `json:"name" yaml:"name"`
	Kind     string      `json:"kind,omitempty" yaml:"kind"`
	Cluster  string      `json:"cluster,omitempty" yaml:"cluster"`
	Approval string      `json:"approval,omitempty" yaml:"approval"`
	Levels   []RuleLevel `json:"levels,omitempty" yaml:"levels"`
}

// ApplyPolicyRequest is the body of POST /api/v1/policy/apply: a whole
// policy file, the name it came from ("file:NAME" marks what it makes),
// and whether to only say what would change (DryRun).
type ApplyPolicyRequest struct {
	Source   string         `json:"source"`
	DryRun   bool           `json:"dry_run,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Document PolicyDocument `json:"document"`
}

// PolicyPlanChange is one change of an apply: Op "+" (made), "~"
// (changed) or "-" (deleted, or a freeze lifted), and a line saying it.
type PolicyPlanChange struct {
	Op   string `json:"op"`
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
}

// PolicyPlan is the answer of POST /api/v1/policy/apply: the changes, in
// order, and whether they were made (false for a dry run).
type PolicyPlan struct {
	Changes []PolicyPlanChange `json:"changes"`
	Applied bool               `json:"applied"`
	// Kept are what the file no longer declares and apply leaves as it
	// is, each with a line saying why (Op "="): a playbook's versions.
	Kept []PolicyPlanChange `json:"kept,omitempty"`
}
