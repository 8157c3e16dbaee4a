// Package approval decides whether an action needs a person's sign-off, and
// binds an approval to the content that was approved.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/config"
)

// Values of Rule.Approval and Policy.Default.
const (
	Required = "required"
	None     = "none"
)

// Rule matches actions by kind glob and cluster glob ("" or "*" match all);
// see glob for the syntax. A rule that requires approval asks for its
// Levels, all of them; without levels, for one approver (AnyApprover).
type Rule struct {
	Kind     string  `mapstructure:"kind" yaml:"kind"`
	Cluster  string  `mapstructure:"cluster" yaml:"cluster"`
	Approval string  `mapstructure:"approval" yaml:"approval"`
	Levels   []Level `mapstructure:"levels" yaml:"levels"`
}

// Policy is the approval configuration of the core. A running core holds
// it in a live.Value, which a reload replaces: read it there at each
// decision, never from a copy kept since.
type Policy struct {
	// Default applies when no rule matches: "required" (the default) or "none".
	Default string `mapstructure:"default" yaml:"default"`
	// SelfApproval lets the requester approve their own action.
	SelfApproval bool `mapstructure:"self_approval" yaml:"self_approval"`
	// TTL is how long an action may wait for approval before it expires.
	TTL   time.Duration `mapstructure:"ttl" yaml:"ttl"`
	Rules []Rule        `mapstructure:"rules" yaml:"rules"`
}

// DefaultPolicy requires approval by another person within 24 hours.
func DefaultPolicy() Policy {
	return Policy{Default: Required, TTL: 24 * time.Hour}
}

// Validate returns one error per bad field.
func (p Policy) Validate() config.Errors {
	var errs config.Errors
	if p.Default != Required && p.Default != None {
		errs.Add("approval.default", "%q is not %q or %q", p.Default, Required, None)
	}
	if p.TTL <= 0 {
		errs.Add("approval.ttl", "must be positive, got %s", p.TTL)
	}
	for i, r := range p.Rules {
		if r.Approval == "" && len(r.Levels) > 0 {
			// Levels say approval is required.
			r.Approval = Required
		}
		validateLevels(&errs, i, r)
		if r.Approval != Required && r.Approval != None {
			errs.Add(fmt.Sprintf("approval.rules[%d].approval", i), "%q is not %q or %q", r.Approval, Required, None)
		}
		for _, f := range []struct{ name, glob string }{{"kind", r.Kind}, {"cluster", r.Cluster}} {
			if !glob.Valid(f.glob) {
				errs.Add(fmt.Sprintf("approval.rules[%d].%s", i, f.name), "bad glob %q (an unclosed [ or {, or a trailing \\)", f.glob)
			}
		}
	}
	return errs
}

// NeedsApproval reports whether an action of kind on cluster must be approved.
// The first matching rule decides; otherwise Default does.
func (p Policy) NeedsApproval(kind, cluster string) bool {
	for _, r := range p.Rules {
		if glob.Match(r.Kind, kind) && glob.Match(r.Cluster, cluster) {
			return r.Approval != None || len(r.Levels) > 0
		}
	}
	return p.Default != None
}

func globMatch(pattern, s string) bool { return glob.Match(pattern, s) }

// SamePerson reports whether a requester and an approver are the same person,
// for four-eyes approval. Names are compared ignoring case, as token names are
// unique ignoring case: Alice may not approve what alice requested.
func SamePerson(requester, approver string) bool { return strings.EqualFold(requester, approver) }

// Refusal is why a person may not approve (or reject) something;
// MayDecide when they may.
type Refusal int

const (
	// MayDecide: nothing stands in the way.
	MayDecide Refusal = iota
	// OwnRequest: they asked for it, and self-approval is off.
	OwnRequest
	// AppliedPlaybook: they applied the playbook version it was made from,
	// and self-approval is off (four eyes over the content too).
	AppliedPlaybook
	// NoRole: their roles do not include approving.
	NoRole
)

// MayApprove is the one answer to "may this person approve?", used by the
// action and run rules and by the web UI alike: approver, whose roles grant
// approving when hasRole, deciding what requester asked for, made from a
// playbook version applied by applier ("" for none). Names are compared
// with SamePerson. It does not look at the approval window.
func (p Policy) MayApprove(requester, applier, approver string, hasRole bool) Refusal {
	switch {
	case SamePerson(requester, approver) && !p.SelfApproval:
		return OwnRequest
	case applier != "" && SamePerson(applier, approver) && !p.SelfApproval:
		return AppliedPlaybook
	case !hasRole:
		return NoRole
	}
	return MayDecide
}

// Digest is a fingerprint of what an approver signs off: kind, args
// (canonical), cluster and node. An action whose digest no longer matches its
// approval must be approved again before it is pushed.
func Digest(a *action.Action) string {
	args, err := action.NormalizeArgs(a.Args)
	if err != nil {
		args = a.Args
	}
	fields := []string{a.Kind, string(args), a.ClusterID, a.NodeID}
	if a.NotBefore != nil {
		// "This, at that time"; an action without one keeps the digest
		// it always had.
		fields = append(fields, a.NotBefore.UTC().Format(time.RFC3339Nano))
	}
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
