package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// teams is an in-memory approval.Directory: team → members.
type teams map[string][]string

func (d teams) TeamsOf(_ context.Context, person string, _ []string) ([]string, error) {
	var out []string
	for t, ms := range d {
		if slices.ContainsFunc(ms, func(m string) bool { return approval.SamePerson(m, person) }) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d teams) TeamMembers(_ context.Context, team string) ([]string, error) { return d[team], nil }

// People of the levels tests: rita requests (and may approve, by role);
// dana is in db, sam in sre, pat in both, olga in neither.
var (
	rita = ops.Caller{Name: "rita", Roles: []string{store.RoleOperator, store.RoleApprover}}
	dana = ops.Caller{Name: "dana", Roles: []string{store.RoleApprover}}
	sam  = ops.Caller{Name: "sam", Roles: []string{store.RoleApprover}}
	pat  = ops.Caller{Name: "pat", Roles: []string{store.RoleApprover}}
	olga = ops.Caller{Name: "olga", Roles: []string{store.RoleApprover}}
)

// setupLevels is setup with a rule asking one approval from db and one
// from sre for everything on prod.
func setupLevels(t *testing.T) *env {
	t.Helper()
	e := setup(t)
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Teams: []string{"db"}, Min: 1}, {Teams: []string{"sre"}, Min: 1}}}}
	e.policy = live.New(pol)
	e.ops = ops.New(ops.Config{Store: e.st, Policy: e.policy, Nudge: e.syncs,
		Directory: teams{"db": {"dana", "pat"}, "sre": {"sam", "pat"}}})
	return e
}

// verb is one approval verb of the levels tests: make makes what it
// approves (asked by rita), approve approves it as c, state reads its
// state, view where its approval stands.
type verb struct {
	name          string
	kind          string
	waiting, done string
	make          func(e *env) string
	approve       func(e *env, c ops.Caller, ref string) error
	state         func(e *env, ref string) string
	view          func(e *env, ref string) *wire.Approval
}

func (e *env) run(id string) *store.Run {
	e.t.Helper()
	var r *store.Run
	if err := e.st.Read(context.Background(), func(rd store.Reader) (err error) { r, err = rd.Run(context.Background(), id); return err }); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) runView(id string) *wire.Approval {
	e.t.Helper()
	var out *wire.Approval
	ctx := context.Background()
	if err := e.st.Read(ctx, func(rd store.Reader) (err error) {
		r, err := rd.Run(ctx, id)
		if err != nil {
			return err
		}
		out, err = e.ops.RunApproval(ctx, rd, r)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// storeRun stores run r as it is, with its children.
func (e *env) storeRun(r *store.Run, kids ...store.Record) string {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertRun(ctx, r); err != nil {
			return err
		}
		for i := range kids {
			if err := tx.InsertAction(ctx, &kids[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// pausedRun is a run of one stage on db-1 and db-2, asked by rita, paused
// in state reason, with canary canary.
func pausedRun(reason string, canary int) *store.Run {
	now := time.Now().UTC().Add(-time.Minute)
	return &store.Run{ID: action.NewID(), ClusterID: "prod", State: store.RunPaused, StateReason: reason, Requester: "rita",
		ApprovedBy: "appr", Digest: strings.Repeat("d", 64), CreatedTS: now, UpdatedTS: now,
		Stages: []store.RunStage{{Name: "upgrade", Target: store.Target{All: true}, Nodes: []string{"db-1", "db-2"},
			MaxConcurrency: limit.Limit{N: 1}, OnFailure: ops.RunOnFailurePause, DependsOn: []string{}, State: store.StageRunning,
			Canary: canary, Steps: []store.RunStep{{Name: "sleep", Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)}}}}}
}

var verbs = []verb{
	{
		name: "action", kind: store.SubjectAction, waiting: string(action.PendingApprove), done: string(action.PendingSchedule),
		make: func(e *env) string { return e.create(rita, "db-1").ID },
		approve: func(e *env, c ops.Caller, ref string) error {
			_, err := e.ops.ApproveAction(context.Background(), c, ref, "")
			return err
		},
		state: func(e *env, ref string) string {
			var s string
			_ = e.st.Read(context.Background(), func(rd store.Reader) error {
				rec, err := rd.Action(context.Background(), ref)
				if err == nil {
					s = string(rec.State)
				}
				return err
			})
			return s
		},
		view: func(e *env, ref string) *wire.Approval {
			var out *wire.Approval
			ctx := context.Background()
			_ = e.st.Read(ctx, func(rd store.Reader) error {
				rec, err := rd.Action(ctx, ref)
				if err == nil {
					out, err = e.ops.ActionApproval(ctx, rd, rec)
				}
				return err
			})
			return out
		},
	},
	{
		name: "run", kind: store.SubjectRun, waiting: store.RunPendingApprove, done: store.RunRunning,
		make: func(e *env) string {
			out, err := e.ops.CreateRun(context.Background(), rita, &wire.CreateRunRequest{ClusterID: "prod",
				Stages: []wire.StageSpec{{Name: "s", Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`),
					Target: wire.Target{Nodes: []string{"db-1"}}}}})
			if err != nil {
				e.t.Fatal(err)
			}
			return out.Run.ID
		},
		approve: func(e *env, c ops.Caller, ref string) error {
			_, err := e.ops.ApproveRun(context.Background(), c, ref, "")
			return err
		},
		state: func(e *env, ref string) string { return e.run(ref).State },
		view:  (*env).runView,
	},
	{
		name: "schedule", kind: store.SubjectSchedule, waiting: store.SchedulePendingApprove, done: store.ScheduleActive,
		make: func(e *env) string {
			ctx := context.Background()
			doc := "name: nightly\nstages:\n  - name: sleep\n    kind: " + kindSleep + "\n    args: {seconds: 1}\n    target: {nodes: [db-1]}\n"
			applier := ops.Caller{Name: "andy", Roles: []string{store.RoleOperator}}
			if _, _, err := e.ops.ApplyPlaybook(ctx, applier, doc); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.ops.ApplySchedule(ctx, rita, &wire.CreateScheduleRequest{Name: "nightly", Cluster: "prod",
				Playbook: "nightly", Cron: "0 2 * * *", Timezone: "UTC"}); err != nil {
				e.t.Fatal(err)
			}
			return "nightly"
		},
		approve: func(e *env, c ops.Caller, ref string) error {
			_, err := e.ops.ApproveSchedule(context.Background(), c, ref, "")
			return err
		},
		state: func(e *env, ref string) string {
			var s string
			_ = e.st.Read(context.Background(), func(rd store.Reader) error {
				sc, err := rd.Schedule(context.Background(), ref)
				if err == nil {
					s = sc.State
				}
				return err
			})
			return s
		},
		view: func(e *env, ref string) *wire.Approval {
			var out *wire.Approval
			ctx := context.Background()
			_ = e.st.Read(ctx, func(rd store.Reader) error {
				sc, err := rd.Schedule(ctx, ref)
				if err == nil {
					out, err = e.ops.ScheduleApproval(ctx, rd, sc)
				}
				return err
			})
			return out
		},
	},
	{
		// Paused by the errors of its stage: db-1 failed, max_errors 0.
		name: "resume past errors", kind: store.SubjectResume, waiting: store.RunPaused, done: store.RunRunning,
		make: func(e *env) string {
			r := pausedRun("stage upgrade failed on 1 node(s), more than its max_errors 0", 0)
			r.Stages[0].Failed = []string{"db-1"}
			now := time.Now().UTC()
			kid := store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "db-1", Kind: kindSleep,
				Args: json.RawMessage(`{"seconds":1}`), State: action.Failed, StateReason: "exit status 1", Origin: action.OriginCore,
				Requester: "rita", ApprovedBy: "appr", CreatedTS: now, UpdatedTS: now, FinishedTS: &now, RunID: r.ID,
				Stage: "upgrade", Step: "sleep", Attempt: 1, Wave: 1}}
			return e.storeRun(r, kid)
		},
		approve: func(e *env, c ops.Caller, ref string) error {
			_, err := e.ops.ResumeRun(context.Background(), c, ref, "forgiven in the test")
			return err
		},
		state: func(e *env, ref string) string { return e.run(ref).State },
		view:  (*env).runView,
	},
	{
		name: "promote", kind: store.SubjectPromote, waiting: store.RunPaused, done: store.RunRunning,
		make: func(e *env) string {
			return e.storeRun(pausedRun(fmt.Sprintf(runs.ReasonCanary, "upgrade", 1, 0), 1))
		},
		approve: func(e *env, c ops.Caller, ref string) error {
			_, err := e.ops.PromoteRun(context.Background(), c, ref, "the canary is healthy")
			return err
		},
		state: func(e *env, ref string) string { return e.run(ref).State },
		view:  (*env).runView,
	},
}

// approvals counts the approvals stored of kind.
func (e *env) approvals(kind, id string) int {
	e.t.Helper()
	n := 0
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		as, err := rd.Approvals(context.Background(), kind, id)
		n = len(as)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// lastEvent is the newest event.
func (e *env) lastEvent() store.Event {
	e.t.Helper()
	var last store.Event
	if _, err := store.EachEvent(context.Background(), e.st, 0, 500, func(ev *store.Event) error { last = *ev; return nil }); err != nil {
		e.t.Fatal(err)
	}
	return last
}

// TestEveryApprovalVerbTakesEveryLevel: for each of the five approval
// verbs, with one level of db and one of sre: the requester's approval,
// one by a person of neither team and a second by the same person are
// refused with a 403 naming why, and change nothing; one from db leaves
// the work waiting with "1 more from sre" (the event says so, the view
// lists who can approve); the one from sre makes the transition.
func TestEveryApprovalVerbTakesEveryLevel(t *testing.T) {
	t.Parallel()
	for _, v := range verbs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			e := setupLevels(t)
			ref := v.make(e)
			id := ref
			if v.kind == store.SubjectSchedule {
				_ = e.st.Read(context.Background(), func(rd store.Reader) error {
					sc, err := rd.Schedule(context.Background(), ref)
					if err == nil {
						id = sc.ID
					}
					return err
				})
			}
			if got := v.state(e, ref); got != v.waiting {
				t.Fatalf("made %s, want %s", got, v.waiting)
			}
			refuse := func(c ops.Caller, why ...string) {
				t.Helper()
				before, stored := e.events(), e.approvals(v.kind, id)
				err := v.approve(e, c, ref)
				if p := ops.Describe(err); err == nil || p.Status != http.StatusForbidden ||
					!slices.ContainsFunc(why, func(w string) bool { return strings.Contains(p.Message, w) }) {
					t.Fatalf("%s: %v, want a 403 saying one of %q", c.Name, err, why)
				}
				if e.events() != before || e.approvals(v.kind, id) != stored || v.state(e, ref) != v.waiting {
					t.Fatalf("%s's refused approval changed something", c.Name)
				}
			}
			// The requester: the domain's own rule says so first.
			refuse(rita, "rita requested", "rita created or last changed", "other than rita")
			refuse(olga, "olga may approve at no level: level 1 takes db, level 2 takes sre")

			if err := v.approve(e, dana, ref); err != nil {
				t.Fatal(err)
			}
			if got := v.state(e, ref); got != v.waiting {
				t.Fatalf("one level of two made it %s", got)
			}
			ev := e.lastEvent()
			if !strings.HasSuffix(ev.Type, ".approval_recorded") || ev.Actor != "dana" ||
				!strings.Contains(ev.Message, "at level 1 (db): 1 more from sre") {
				t.Fatalf("event %s %q", ev.Type, ev.Message)
			}
			view := v.view(e, ref)
			if view == nil || view.Satisfied || view.Subject != v.kind || len(view.Levels) != 2 ||
				!slices.Equal(view.Levels[0].ApprovedBy, []string{"dana"}) || view.Levels[1].Remaining != 1 ||
				!slices.Equal(view.Levels[1].CanApprove, []string{"pat", "sam"}) ||
				view.Lines[1] != "level 2 (sre): 0 of 1 — can approve: pat, sam" {
				t.Fatalf("view %+v", view)
			}
			refuse(dana, "dana approved it already")

			if err := v.approve(e, sam, ref); err != nil {
				t.Fatal(err)
			}
			if got := v.state(e, ref); got != v.done {
				t.Fatalf("both levels left it %s, want %s", got, v.done)
			}
			if e.approvals(v.kind, id) != 2 {
				t.Fatalf("%d approvals stored, want 2", e.approvals(v.kind, id))
			}
		})
	}
}

// TestPersonInBothTeamsCountsOnce: pat, in db and sre, approves once, at
// db; sre still needs someone else, and pat may not approve again.
func TestPersonInBothTeamsCountsOnce(t *testing.T) {
	t.Parallel()
	e := setupLevels(t)
	ref := verbs[1].make(e)
	if err := verbs[1].approve(e, pat, ref); err != nil {
		t.Fatal(err)
	}
	if err := verbs[1].approve(e, pat, ref); err == nil {
		t.Fatal("pat approved twice")
	}
	if got := e.run(ref).State; got != store.RunPendingApprove {
		t.Fatalf("pat alone made it %s", got)
	}
	if err := verbs[1].approve(e, dana, ref); ops.Describe(err).Status != http.StatusForbidden ||
		!strings.Contains(err.Error(), "the levels dana may approve are met: 1 more from sre") {
		t.Fatalf("dana after pat: %v", err)
	}
	if err := verbs[1].approve(e, sam, ref); err != nil {
		t.Fatal(err)
	}
	if got := e.run(ref).State; got != store.RunRunning {
		t.Fatalf("pat and sam made it %s", got)
	}
}

// TestAnyEligibleRejectRejects: a reject by a person of no level is
// refused; one by a person of any level rejects at once, even after
// another level's approval.
func TestAnyEligibleRejectRejects(t *testing.T) {
	t.Parallel()
	e := setupLevels(t)
	ctx := context.Background()
	rec := e.create(rita, "db-1")
	if _, err := e.ops.ApproveAction(ctx, dana, rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.RejectAction(ctx, olga, rec.ID, "no"); ops.Describe(err).Status != http.StatusForbidden ||
		!strings.Contains(err.Error(), "may reject at no level") {
		t.Fatalf("olga's reject: %v", err)
	}
	got, err := e.ops.RejectAction(ctx, sam, rec.ID, "not tonight")
	if err != nil || got.State != action.Cancelled {
		t.Fatalf("sam's reject: %v, %v", got, err)
	}
	run := verbs[1].make(e)
	if _, err := e.ops.RejectRun(ctx, olga, run, ""); ops.Describe(err).Status != http.StatusForbidden {
		t.Fatalf("olga's run reject: %v", err)
	}
	if out, err := e.ops.RejectRun(ctx, dana, run, ""); err != nil || out.Run.State != store.RunCancelled {
		t.Fatalf("dana's run reject: %v", err)
	}
}

// TestChangedContentVoidsApprovals: an approval of an action whose
// content changed since (its digest is another) counts for nothing.
func TestChangedContentVoidsApprovals(t *testing.T) {
	t.Parallel()
	e := setupLevels(t)
	ctx := context.Background()
	rec := e.create(rita, "db-1")
	if _, err := e.ops.ApproveAction(ctx, dana, rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Action(ctx, rec.ID)
		if err != nil {
			return err
		}
		cur.Args = json.RawMessage(`{"seconds":2}`)
		return tx.UpdateAction(ctx, cur)
	}); err != nil {
		t.Fatal(err)
	}
	view := verbs[0].view(e, rec.ID)
	if view.Void != 1 || len(view.Levels[0].ApprovedBy) != 0 {
		t.Fatalf("view after the change %+v", view)
	}
	if _, err := e.ops.ApproveAction(ctx, sam, rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := verbs[0].state(e, rec.ID); got != string(action.PendingApprove) {
		t.Fatalf("a void approval counted: %s", got)
	}
}

// TestWithoutLevelsOneApproverDecides: the default policy (no rule with
// levels) is one approver, as before.
func TestWithoutLevelsOneApproverDecides(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.ops = ops.New(ops.Config{Store: e.st, Policy: e.policy, Nudge: e.syncs})
	rec := e.create(rita, "db-1")
	got, err := e.ops.ApproveAction(context.Background(), olga, rec.ID, "")
	if err != nil || got.State != action.PendingSchedule {
		t.Fatalf("one approver: %v, %v", got, err)
	}
}
