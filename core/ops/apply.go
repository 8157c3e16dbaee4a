package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Declarative policy (docs/policy-as-data.md, "apply and diff"): a whole
// policy file in one call. ApplyPolicy compares what it declares with what
// the store holds and makes only the differences, in one transaction: all
// of them or, on the first refusal (a bad field, a change the caller may
// not make), none. What it makes is marked with the file's name (source
// "file:NAME"); what a former apply of the same file made and the file no
// longer declares is deleted (a freeze lifted). Records made by hand, by
// the configuration or by another file are changed only when the file
// names them (a window or rule by name, a budget by cluster): the file
// then owns them. A second apply of the same file changes nothing.

// MaxPolicyItems bounds the entries of a policy file, every kind together.
const MaxPolicyItems = 1024

// planStep is one change of a plan: its line, and how it is made.
type planStep struct {
	change wire.PolicyPlanChange
	// authorize checks the caller may make it; apply makes it.
	authorize func(ctx context.Context, tx store.Reader) error
	apply     func(ctx context.Context, tx store.Tx) error
	cluster   string
	// loosens: the step may let held work go (policy.Loosens, a delete,
	// a freeze lifted); an apply with one needs a reason of its own.
	loosens bool
}

// ApplyPolicy makes the store hold req's document (or, with DryRun, only
// says what that would change), and returns the changes in order.
func (o *Ops) ApplyPolicy(ctx context.Context, c Caller, req *wire.ApplyPolicyRequest) (wire.PolicyPlan, error) {
	perm := auth.Freeze
	if req.DryRun {
		perm = auth.Read
	}
	if err := Authorize(c, perm); err != nil {
		return wire.PolicyPlan{}, err
	}
	if req.Source == "" {
		return wire.PolicyPlan{}, BadRequest("source is required: file:NAME, the file the policy comes from")
	}
	if err := checkFileSource(req.Source); err != nil {
		return wire.PolicyPlan{}, err
	}
	reason := strings.TrimSpace(req.Reason)
	explicit := reason != ""
	if reason == "" {
		reason = "applied from " + strings.TrimPrefix(req.Source, store.SourceFilePrefix)
	}
	if err := checkReason(reason, true); err != nil {
		return wire.PolicyPlan{}, err
	}
	want, err := o.checkDocument(&req.Document)
	if err != nil {
		return wire.PolicyPlan{}, err
	}
	now := o.now()
	var steps []planStep
	var kept []wire.PolicyPlanChange
	plan := func(ctx context.Context, r store.Reader) error {
		var err error
		steps, kept, err = o.planPolicy(ctx, r, c, req.Source, reason, want, now)
		return err
	}
	// Every cluster the file names must exist for the caller, whether or
	// not anything of it changes (404 otherwise, as anywhere).
	visible := func(ctx context.Context, r store.Reader) error {
		v, err := Visibility(ctx, r, c)
		if err != nil {
			return err
		}
		for _, id := range want.clusters() {
			if err := v.Check("cluster", id); err != nil {
				return err
			}
		}
		return nil
	}
	if req.DryRun {
		err = o.st.Read(ctx, func(r store.Reader) error {
			if err := visible(ctx, r); err != nil {
				return err
			}
			return plan(ctx, r)
		})
	} else {
		err = o.st.Update(ctx, func(tx store.Tx) error {
			if err := visible(ctx, tx); err != nil {
				return err
			}
			if err := plan(ctx, tx); err != nil {
				return err
			}
			if !explicit {
				for _, s := range steps {
					if s.loosens {
						return BadRequest("%s: this may let held work go; say why with a reason (muster apply --reason, API field reason)",
							s.change.Text)
					}
				}
			}
			for _, s := range steps {
				if err := s.authorize(ctx, tx); err != nil {
					return fmt.Errorf("%s: %w", s.change.Text, err)
				}
				if err := s.apply(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return wire.PolicyPlan{}, err
	}
	out := wire.PolicyPlan{Changes: []wire.PolicyPlanChange{}, Applied: !req.DryRun && len(steps) > 0, Kept: kept}
	nudged := map[string]bool{}
	for _, s := range steps {
		out.Changes = append(out.Changes, s.change)
		if out.Applied && s.cluster != "" && !nudged[s.cluster] {
			nudged[s.cluster] = true
			o.nudgeCluster(s.cluster)
		}
	}
	return out, nil
}

// declared is a checked document: each record by kind and id, in the
// file's order, and the freezes.
type declared struct {
	freezes []wire.PolicyFreeze
	records []declaredRecord
	teams   []store.Team
	grants  []store.Grant
	// playbooks and schedules: checkRunsOf.
	playbooks []declaredPlaybook
	schedules []wire.CreateScheduleRequest
}

// clusters are the clusters d names, each once.
func (d declared) clusters() []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, f := range d.freezes {
		add(f.Cluster)
	}
	for _, r := range d.records {
		add(r.rec.ClusterID)
	}
	for _, s := range d.schedules {
		add(s.Cluster)
	}
	return out
}

type declaredRecord struct {
	kind, id string
	rec      policy.Record
}

// checkDocument checks every entry of d: a 400 naming the first bad one.
func (o *Ops) checkDocument(d *wire.PolicyDocument) (declared, error) {
	var out declared
	if n := len(d.Freezes) + len(d.Windows) + len(d.Budgets) + len(d.ApprovalRules) + len(d.Teams) + len(d.Grants) +
		len(d.Playbooks) + len(d.Schedules); n > MaxPolicyItems {
		return out, BadRequest("the policy declares %d entries, at most %d", n, MaxPolicyItems)
	}
	var err error
	if out.teams, out.grants, err = checkAccess(d); err != nil {
		return out, err
	}
	if err := o.checkRunsOf(d, &out); err != nil {
		return out, err
	}
	for i, f := range d.Freezes {
		at := fmt.Sprintf("freezes[%d]", i)
		if err := names.CheckID(f.Cluster); err != nil {
			return out, BadRequest("%s.cluster: %v", at, err)
		}
		if f.From.IsZero() || f.To.IsZero() || !f.To.After(f.From) {
			return out, BadRequest("%s: from and to are required, to after from", at)
		}
		if f.To.After(o.now().Add(MaxFreezeAhead)) {
			return out, BadRequest("%s.to %s is more than a year ahead", at, f.To.UTC().Format(time.RFC3339))
		}
		if err := checkFreezeReason(f.Reason, "the cluster is frozen"); err != nil {
			return out, BadRequest("%s.reason: %v", at, err)
		}
		f.From, f.To, f.Reason = f.From.UTC(), f.To.UTC(), strings.TrimSpace(f.Reason)
		out.freezes = append(out.freezes, f)
	}
	seen := map[string]bool{}
	add := func(at, kind, id string, spec any) error {
		if seen[kind+"/"+id] {
			return BadRequest("%s: %s %s is declared twice", at, policy.Name(kind), id)
		}
		seen[kind+"/"+id] = true
		b, _ := json.Marshal(spec)
		r, err := policy.Check(kind, id, b, o.cfg.MinWindow)
		if err != nil {
			return BadRequest("%s: %s", at, strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": "))
		}
		out.records = append(out.records, declaredRecord{kind: kind, id: id, rec: r})
		return nil
	}
	for i, w := range d.Windows {
		if err := add(fmt.Sprintf("windows[%d]", i), store.PolicyWindow, w.Name,
			wire.WindowSpec{Cluster: w.Cluster, Cron: w.Cron, Duration: w.Duration, Timezone: w.Timezone}); err != nil {
			return out, err
		}
	}
	for i, b := range d.Budgets {
		if err := add(fmt.Sprintf("budgets[%d]", i), store.PolicyBudget, b.Cluster,
			wire.BudgetSpec(b)); err != nil {
			return out, err
		}
	}
	if len(d.ApprovalRules) > policy.MaxRules {
		return out, BadRequest("%d approval rules, at most %d", len(d.ApprovalRules), policy.MaxRules)
	}
	for i, r := range d.ApprovalRules {
		if err := add(fmt.Sprintf("approval_rules[%d]", i), store.PolicyApprovalRule, r.Name,
			wire.ApprovalRuleSpec{Position: i, Kind: r.Kind, Cluster: r.Cluster, Approval: r.Approval, Levels: r.Levels}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// sameFreeze reports whether a stored freeze is the declared one: same
// cluster, end and reason, and the same start, or a declared start before
// the stored one that began at its making (a start in the past is now).
func sameFreeze(s store.Freeze, w wire.PolicyFreeze) bool {
	if s.ClusterID != w.Cluster || !s.To.Equal(w.To) || s.Reason != w.Reason {
		return false
	}
	return s.From.Equal(w.From) || (w.From.Before(s.From) && !s.From.After(s.CreatedTS.Add(time.Second)))
}

// planPolicy compares want with r and returns the changes: teams and
// grants (planAccess), freezes, then each kind of record in policy.Kinds'
// order, then playbooks and schedules (planPlaybooks, planSchedules);
// within each, what is made or changed in the file's order, then what is
// deleted. kept are what the file no longer declares and apply keeps.
func (o *Ops) planPolicy(ctx context.Context, r store.Reader, c Caller, source, reason string, want declared, now time.Time) ([]planStep, []wire.PolicyPlanChange, error) {
	steps, err := o.planPolicyRecords(ctx, r, c, source, reason, want, now)
	if err != nil {
		return nil, nil, err
	}
	// Playbooks, then the schedules that may run them.
	v, err := Visibility(ctx, r, c)
	if err != nil {
		return nil, nil, err
	}
	pbs, kept, err := o.planPlaybooks(ctx, r, c, source, want.playbooks)
	if err != nil {
		return nil, nil, err
	}
	scs, err := o.planSchedules(ctx, r, c, source, want.schedules, func(cluster string) bool { return cluster == "" || v.Has(cluster) })
	if err != nil {
		return nil, nil, err
	}
	return append(append(steps, pbs...), scs...), kept, nil
}

// planPolicyRecords plans teams and grants, freezes and policy records.
func (o *Ops) planPolicyRecords(ctx context.Context, r store.Reader, c Caller, source, reason string, want declared, now time.Time) ([]planStep, error) {
	// Teams and grants are planned for a caller who may grant somewhere:
	// the grants of a file are not for every reader to see. A file that
	// declares some needs it; one that declares none leaves them to such a
	// caller.
	var steps []planStep
	// Only what the caller may read is planned: a record or freeze of
	// this file in another cluster is neither shown, nor changed, nor
	// deleted (another person's apply of the file owns it there).
	v, err := Visibility(ctx, r, c)
	if err != nil {
		return nil, err
	}
	seen := func(cluster string) bool { return cluster == "" || v.Has(cluster) }
	if len(want.teams)+len(want.grants) > 0 {
		if err := Authorize(c, auth.Grants); err != nil {
			return nil, err
		}
	}
	if c.Can(auth.Grants) {
		if steps, err = o.planAccess(ctx, r, c, source, want.teams, want.grants); err != nil {
			return nil, err
		}
	}
	// Freezes: made when none of this file's in force is the same; those
	// of this file no longer declared are lifted.
	have, err := r.Freezes(ctx, store.FreezeQuery{Live: true, EndsAfter: now})
	if err != nil {
		return nil, err
	}
	var mine []store.Freeze
	for _, f := range have {
		if f.Source == source && seen(f.ClusterID) {
			mine = append(mine, f)
		}
	}
	matched := make([]bool, len(mine))
	for _, w := range want.freezes {
		found := false
		for j, s := range mine {
			if !matched[j] && sameFreeze(s, w) {
				matched[j], found = true, true
				break
			}
		}
		if found || !w.To.After(now) { // one that ended has nothing to hold
			continue
		}
		from := w.From
		if from.Before(now) {
			from = now
		}
		f := &store.Freeze{ID: action.NewID(), ClusterID: w.Cluster, From: from, To: w.To, Reason: w.Reason, Source: source,
			CreatedBy: c.Name, CreatedTS: now}
		steps = append(steps, planStep{cluster: w.Cluster,
			change: wire.PolicyPlanChange{Op: "+", Kind: "freeze", Text: fmt.Sprintf("+ freeze %s from %s until %s: %s", w.Cluster,
				w.From.Format(time.RFC3339), w.To.Format(time.RFC3339), w.Reason)},
			authorize: func(ctx context.Context, tx store.Reader) error {
				if err := authorizeIn(ctx, tx, c, auth.Freeze, f.ClusterID); err != nil {
					return err
				}
				_, err := tx.Cluster(ctx, f.ClusterID)
				return err
			},
			apply: func(ctx context.Context, tx store.Tx) error { return InsertFreeze(ctx, tx, f, c.Name, c.Addr) }})
	}
	for j := range mine {
		if matched[j] {
			continue
		}
		f := mine[j]
		steps = append(steps, planStep{cluster: f.ClusterID, loosens: true,
			change: wire.PolicyPlanChange{Op: "-", Kind: "freeze", ID: f.ID, Text: fmt.Sprintf("- freeze %s of %s from %s until %s: %s (lifted: no longer in the file)",
				f.ID, f.ClusterID, f.From.UTC().Format(time.RFC3339), f.To.UTC().Format(time.RFC3339), f.Reason)},
			authorize: func(ctx context.Context, tx store.Reader) error {
				return authorizeIn(ctx, tx, c, auth.Unfreeze, f.ClusterID)
			},
			apply: func(ctx context.Context, tx store.Tx) error {
				return liftFreeze(ctx, tx, &f, now, c.Name, c.Addr, "no longer in "+strings.TrimPrefix(source, store.SourceFilePrefix))
			}})
	}
	// Records, kind by kind.
	for _, kind := range policy.Kinds {
		declaredIDs := map[string]bool{}
		for _, d := range want.records {
			if d.kind != kind {
				continue
			}
			declaredIDs[d.id] = true
			cur, curRec, err := liveRecord(ctx, r, kind, d.id)
			if err != nil {
				return nil, err
			}
			if cur != nil && cur.Spec == d.rec.Spec && cur.Source == source {
				continue
			}
			if cur != nil && !seen(cur.ClusterID) {
				// The name is another cluster's, which the caller cannot
				// read: refused, without saying what it holds.
				return nil, fmt.Errorf("%w: %s %s: the name is taken; name it otherwise", ErrConflict, policy.Name(kind), d.id)
			}
			next := d.rec
			rec := &store.PolicyRecord{Kind: kind, ID: d.id, ClusterID: next.ClusterID, Spec: next.Spec, Source: source, Reason: reason,
				UpdatedTS: now}
			ch := wire.PolicyPlanChange{Op: "+", Kind: kind, ID: d.id,
				Text: fmt.Sprintf("+ %s %s: %s", policy.Name(kind), d.id, policy.Describe(kind, next.Spec))}
			if cur != nil {
				ch.Op = "~"
				switch {
				case cur.Spec == next.Spec:
					ch.Text = fmt.Sprintf("~ %s %s: %s (now from %s, was %s)", policy.Name(kind), d.id, policy.Describe(kind, next.Spec),
						source, sourceName(cur.Source))
				default:
					ch.Text = fmt.Sprintf("~ %s %s: %s -> %s", policy.Name(kind), d.id, policy.Describe(kind, cur.Spec),
						policy.Describe(kind, next.Spec))
				}
			}
			kind, id := kind, d.id
			others := 0
			if kind == store.PolicyWindow {
				ws, err := r.Policies(ctx, store.PolicyQuery{Kind: kind, ClusterID: next.ClusterID, Live: true})
				if err != nil {
					return nil, err
				}
				for _, w := range ws {
					if w.ID != id {
						others++
					}
				}
			}
			steps = append(steps, planStep{cluster: next.ClusterID, change: ch, loosens: policy.Loosens(kind, curRec, &next, others),
				authorize: func(ctx context.Context, tx store.Reader) error {
					if curRec == nil {
						if err := mayReuse(ctx, tx, c, kind, id, next.ClusterID); err != nil {
							return err
						}
					}
					// A takeover (only the source changes) takes what a
					// change by hand takes: the file may later change or
					// delete what it owns.
					return authorizeRecord(ctx, tx, c, kind, id, curRec, &next)
				},
				apply: func(ctx context.Context, tx store.Tx) error {
					if kind == store.PolicyApprovalRule && curRec == nil {
						if err := countRules(ctx, tx, 1); err != nil {
							return err
						}
					}
					_, err := policy.Put(ctx, tx, rec, c.Name, c.Addr)
					return err
				}})
		}
		stored, err := r.Policies(ctx, store.PolicyQuery{Kind: kind, Live: true})
		if err != nil {
			return nil, err
		}
		for _, p := range stored {
			if p.Source != source || declaredIDs[p.ID] || !seen(p.ClusterID) {
				continue
			}
			kind, id := kind, p.ID
			cur := &policy.Record{ClusterID: p.ClusterID, Spec: p.Spec}
			steps = append(steps, planStep{cluster: p.ClusterID, loosens: true,
				change: wire.PolicyPlanChange{Op: "-", Kind: kind, ID: id, Text: fmt.Sprintf("- %s %s: %s (deleted: no longer in the file)",
					policy.Name(kind), id, policy.Describe(kind, p.Spec))},
				authorize: func(ctx context.Context, tx store.Reader) error {
					return authorizeRecord(ctx, tx, c, kind, id, cur, nil)
				},
				apply: func(ctx context.Context, tx store.Tx) error {
					_, err := policy.Delete(ctx, tx, kind, id, now, c.Name, c.Addr, "no longer in "+
						strings.TrimPrefix(source, store.SourceFilePrefix))
					return err
				}})
		}
	}
	return steps, nil
}

// sourceName is a record's source as people read it.
func sourceName(src string) string {
	if src == "" {
		return "made by hand"
	}
	return src
}
