package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Playbooks and schedules in a policy file (ApplyPolicy). A playbook gets
// a new version, marked with the file, only when its document differs from
// the newest version (by digest), with the permission and checks of muster
// playbook apply. A playbook the file no longer declares is kept, every
// version of it: runs and schedules refer to versions, and a version is
// history; the plan says so (PolicyPlan.Kept). A schedule is made, or
// changed (which sends it back to approval), by the function muster
// schedule apply uses (putSchedule), marked with the file; one the file
// made and no longer declares is deleted, with the permission of muster
// schedule delete. A schedule of the same fields is left alone, whatever
// its state: a rejected one stays rejected until the file changes it.

// declaredPlaybook is a playbook of a policy file, parsed.
type declaredPlaybook struct {
	name, doc string
	parsed    *playbook.Playbook
}

// checkRunsOf checks the playbooks and schedules of d into out.
func (o *Ops) checkRunsOf(d *wire.PolicyDocument, out *declared) error {
	seen := map[string]bool{}
	for i, p := range d.Playbooks {
		at := fmt.Sprintf("playbooks[%d]", i)
		if p.Name == "" {
			return BadRequest("%s.name is required", at)
		}
		if seen[p.Name] {
			return BadRequest("%s: playbook %s is declared twice", at, p.Name)
		}
		seen[p.Name] = true
		parsed, err := playbook.Parse([]byte(p.Document))
		if err != nil {
			return BadRequest("%s (%s): %s", at, p.Name, strings.TrimPrefix(err.Error(), playbook.ErrInvalid.Error()+": "))
		}
		if parsed.Name != p.Name {
			return BadRequest("%s: the document names playbook %s, not %s", at, parsed.Name, p.Name)
		}
		out.playbooks = append(out.playbooks, declaredPlaybook{name: p.Name, doc: p.Document, parsed: parsed})
	}
	seen = map[string]bool{}
	for i := range d.Schedules {
		req := d.Schedules[i]
		at := fmt.Sprintf("schedules[%d]", i)
		if err := o.checkSchedule(&req); err != nil {
			var fe *schedule.FieldError
			if errors.As(err, &fe) {
				return BadRequest("%s.%s: %s", at, fe.Field, fe.Msg)
			}
			return BadRequest("%s: %v", at, err)
		}
		if seen[req.Name] {
			return BadRequest("%s: schedule %s is declared twice", at, req.Name)
		}
		seen[req.Name] = true
		out.schedules = append(out.schedules, req)
	}
	return nil
}

// planPlaybooks plans the playbooks of a file: a new version of each whose
// document is not the newest version's; what the file no longer declares is
// kept, and said so.
func (o *Ops) planPlaybooks(ctx context.Context, r store.Reader, c Caller, source string, want []declaredPlaybook) ([]planStep, []wire.PolicyPlanChange, error) {
	var steps []planStep
	declaredNames := map[string]bool{}
	for _, p := range want {
		declaredNames[p.name] = true
		latest, err := r.Playbook(ctx, p.name, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
			latest = nil
		case err != nil:
			return nil, nil, err
		}
		if latest != nil && latest.Digest == playbook.Digest(p.doc) {
			continue
		}
		ch := wire.PolicyPlanChange{Op: "+", Kind: "playbook", ID: p.name,
			Text: fmt.Sprintf("+ playbook %s version 1: %s", p.name, describePlaybook(p.parsed))}
		if latest != nil {
			ch.Op = "~"
			ch.Text = fmt.Sprintf("~ playbook %s: version %d (%s), the document differs from version %d (%s)", p.name,
				latest.Version+1, describePlaybook(p.parsed), latest.Version, sourceName(latest.Source))
		}
		p := p
		steps = append(steps, planStep{change: ch,
			// As muster playbook apply: a version runs wherever a run of
			// the playbook starts.
			authorize: func(ctx context.Context, tx store.Reader) error { return AuthorizeEverywhere(c, auth.Create) },
			apply: func(ctx context.Context, tx store.Tx) error {
				_, _, err := playbook.ApplyFrom(ctx, tx, p.doc, p.parsed, c.Name, source)
				return err
			}})
	}
	have, err := r.Playbooks(ctx)
	if err != nil {
		return nil, nil, err
	}
	var kept []wire.PolicyPlanChange
	for _, p := range have {
		if p.Source != source || declaredNames[p.Name] {
			continue
		}
		kept = append(kept, wire.PolicyPlanChange{Op: "=", Kind: "playbook", ID: p.Name,
			Text: fmt.Sprintf("= playbook %s kept: no longer in the file, but its versions stay (runs and schedules refer to them); version %d is the newest",
				p.Name, p.Version)})
	}
	return steps, kept, nil
}

// describePlaybook is a playbook in a plan line: its description, or its
// stage count.
func describePlaybook(p *playbook.Playbook) string {
	if d := strings.TrimSpace(p.Description); d != "" {
		return d
	}
	return fmt.Sprintf("%d stage(s)", len(p.Stages))
}

// planSchedules plans the schedules of a file: each made or changed (back
// to approval) in the file's order, then those of the file it no longer
// declares deleted. Only the schedules of clusters the caller can read are
// planned, as the records.
func (o *Ops) planSchedules(ctx context.Context, r store.Reader, c Caller, source string, want []wire.CreateScheduleRequest,
	seen func(cluster string) bool) ([]planStep, error) {
	var steps []planStep
	declaredNames := map[string]bool{}
	for i := range want {
		req := want[i]
		declaredNames[req.Name] = true
		cur, err := r.Schedule(ctx, req.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			cur = nil
		case err != nil:
			return nil, err
		}
		ch := wire.PolicyPlanChange{Op: "+", Kind: "schedule", ID: req.Name,
			Text: fmt.Sprintf("+ schedule %s: %s (waits for approval)", req.Name, describeSchedule(req))}
		if cur != nil {
			if !seen(cur.ClusterID) {
				return nil, fmt.Errorf("%w: schedule %s: the name is taken; name it otherwise", ErrConflict, req.Name)
			}
			differs, err := o.cfg.Schedules.Differs(cur, &req)
			if err != nil {
				return nil, err
			}
			if !differs && cur.Source == source {
				continue
			}
			ch.Op = "~"
			if differs {
				ch.Text = fmt.Sprintf("~ schedule %s: %s -> %s (waits for approval again)", req.Name, describeSchedule(storedScheduleRequest(cur)),
					describeSchedule(req))
			} else {
				ch.Text = fmt.Sprintf("~ schedule %s: %s (now from %s, was %s)", req.Name, describeSchedule(req), source, sourceName(cur.Source))
			}
		}
		steps = append(steps, planStep{cluster: req.Cluster, change: ch,
			authorize: func(ctx context.Context, tx store.Reader) error { return o.authorizeSchedule(ctx, tx, c, &req) },
			apply: func(ctx context.Context, tx store.Tx) error {
				_, _, err := o.putSchedule(ctx, tx, c, &req, source)
				return err
			}})
	}
	have, err := r.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	for _, sc := range have {
		if sc.Source != source || declaredNames[sc.Name] || !seen(sc.ClusterID) {
			continue
		}
		name, cluster := sc.Name, sc.ClusterID
		steps = append(steps, planStep{cluster: cluster,
			change: wire.PolicyPlanChange{Op: "-", Kind: "schedule", ID: name,
				Text: fmt.Sprintf("- schedule %s: %s (deleted: no longer in the file; its runs stay)", name,
					describeSchedule(storedScheduleRequest(&sc)))},
			// As muster schedule delete.
			authorize: func(ctx context.Context, tx store.Reader) error {
				return hideCluster("schedule", name, authorizeIn(ctx, tx, c, auth.Cancel, cluster))
			},
			apply: func(ctx context.Context, tx store.Tx) error {
				_, err := o.cfg.Schedules.Delete(ctx, tx, name, c.actor("no longer in "+strings.TrimPrefix(source, store.SourceFilePrefix)))
				return err
			}})
	}
	return steps, nil
}

// storedScheduleRequest is a stored schedule as the request that makes it.
func storedScheduleRequest(sc *store.Schedule) wire.CreateScheduleRequest {
	req := wire.CreateScheduleRequest{Name: sc.Name, Cluster: sc.ClusterID, Playbook: sc.Playbook, Version: wire.VersionRef(sc.Version),
		Cron: sc.Cron, Timezone: sc.Timezone, Concurrency: sc.Concurrency, CatchUp: fmt.Sprintf("%ds", sc.CatchUpS)}
	_ = json.Unmarshal(sc.Params, &req.Params)
	return req
}

// describeSchedule is a schedule in a plan line.
func describeSchedule(req wire.CreateScheduleRequest) string {
	tz := req.Timezone
	if tz == "" {
		tz = "UTC"
	}
	s := fmt.Sprintf("playbook %s %s on %s at %q (%s)", req.Playbook, req.Version, req.Cluster, req.Cron, tz)
	if len(req.Params) > 0 {
		keys := make([]string, 0, len(req.Params))
		for k := range req.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+req.Params[k])
		}
		s += ", params " + strings.Join(kv, " ")
	}
	if req.Concurrency != "" && req.Concurrency != "forbid" { // forbid: the default
		s += ", concurrency " + req.Concurrency
	}
	return s
}
