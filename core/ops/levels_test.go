package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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

// People of the levels tests: rita requests (and may approve, by role);
// dana is in db, sam in sre, pat in both, olga in neither.
var (
	rita = ops.Caller{Name: "rita", Roles: []string{store.RoleOperator, store.RoleApprover}}
	dana = ops.Caller{Name: "dana", Roles: []string{store.RoleApprover}}
	sam  = ops.Caller{Name: "sam", Roles: []string{store.RoleApprover}}
	pat  = ops.Caller{Name: "pat", Roles: []string{store.RoleApprover}}
	olga = ops.Caller{Name: "olga", Roles: []string{store.RoleApprover}}
)

// setupLevels is setup with a rule asking one approval from team db and
// one from team sre for everything on prod; both teams, stored, hold
// approver on prod.
func setupLevels(t *testing.T) *env {
	t.Helper()
	e := setup(t)
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Teams: []string{"db"}, Min: 1}, {Teams: []string{"sre"}, Min: 1}}}}
	e.policy = live.New(pol)
	e.ops = ops.New(ops.Config{Store: e.st, Policy: e.policy, Nudge: e.syncs})
	e.teams(map[string][]string{"db": {"dana", "pat"}, "sre": {"sam", "pat"}})
	e.grant(wire.CreateGrantRequest{Team: "db", Role: store.RoleApprover, Clusters: "prod"},
		wire.CreateGrantRequest{Team: "sre", Role: store.RoleApprover, Clusters: "prod"})
	return e
}

// teams makes each team with its members.
func (e *env) teams(ts map[string][]string) {
	e.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		if _, err := e.ops.CreateTeam(context.Background(), admin, &wire.CreateTeamRequest{Name: name, Members: ts[name]}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// grant makes each grant.
func (e *env) grant(gs ...wire.CreateGrantRequest) {
	e.t.Helper()
	for _, g := range gs {
		if _, err := e.ops.CreateGrant(context.Background(), admin, &g); err != nil {
			e.t.Fatal(err)
		}
	}
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

// TestCanApproveNamesOnlyApproversOfTheCluster: for each approval verb,
// a level's can_approve names only the members who hold approve on the
// work's cluster through some grant: their own (by glob or by the
// cluster's labels), a team's (listed, or through a group claim they last
// signed in with) or a token's global role. A member who is only a viewer
// there, or an approver of other clusters, is not listed, and their
// approval is refused (403) and changes nothing.
func TestCanApproveNamesOnlyApproversOfTheCluster(t *testing.T) {
	t.Parallel()
	for _, v := range verbs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			e := setupLevels(t)
			ctx := context.Background()
			e.teams(map[string][]string{"oncall": nil})
			for _, m := range []string{"vic", "gus", "lee", "tom", "tess"} {
				if _, err := e.ops.ChangeTeam(ctx, admin, "sre", ops.AddMember, m); err != nil {
					t.Fatal(err)
				}
			}
			for team, g := range map[string]string{"sre": "sre-oncall", "oncall": "sre-oncall"} {
				if _, err := e.ops.ChangeTeam(ctx, admin, team, ops.MapGroup, g); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.st.Update(ctx, func(tx store.Tx) error {
				if err := tx.PutClusterLabels(ctx, "prod", map[string]string{"tier": "prod"}); err != nil {
					return err
				}
				return tx.UpsertPerson(ctx, &store.Person{Name: "ola", Source: "oidc", Groups: []string{"sre-oncall"}, LastSeenTS: time.Now()})
			}); err != nil {
				t.Fatal(err)
			}
			// sre holds approver on prod no more: viewer everywhere.
			var sreGrant string
			gs, err := e.ops.Grants(ctx, admin)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				if g.Team == "sre" {
					sreGrant = g.ID
				}
			}
			if err := e.ops.RevokeGrant(ctx, admin, sreGrant); err != nil {
				t.Fatal(err)
			}
			e.grant(wire.CreateGrantRequest{Team: "sre", Role: store.RoleViewer, Clusters: "*"},
				wire.CreateGrantRequest{Person: "sam", Role: store.RoleApprover, Clusters: "pro*"},
				wire.CreateGrantRequest{Person: "lee", Role: store.RoleApprover, Labels: map[string]string{"tier": "prod"}},
				wire.CreateGrantRequest{Person: "gus", Role: store.RoleApprover, Clusters: "staging-*"},
				wire.CreateGrantRequest{Team: "oncall", Role: store.RoleApprover, Clusters: "prod"})
			tokens := map[string][]string{"tess": {store.RoleApprover}, "vic": {}, "tom": {store.RoleViewer}}
			for name, roles := range tokens {
				if _, err := e.ops.CreateToken(ctx, admin, &wire.CreateTokenRequest{Name: name, Roles: roles}); err != nil {
					t.Fatal(err)
				}
			}

			ref := v.make(e)
			if err := v.approve(e, dana, ref); err != nil {
				t.Fatal(err)
			}
			view := v.view(e, ref)
			if want := []string{"lee", "ola", "pat", "sam", "tess"}; view == nil || !slices.Equal(view.Levels[1].CanApprove, want) ||
				view.Lines[1] != "level 2 (sre): 0 of 1 — can approve: lee, ola, pat, sam, tess" {
				t.Fatalf("view %+v, want level 2's can_approve %v", view, want)
			}
			for _, name := range []string{"vic", "gus", "tom"} {
				c, err := e.ops.Identify(ctx, name, tokens[name], nil, "192.0.2.20")
				if err != nil {
					t.Fatal(err)
				}
				before := e.events()
				if err := v.approve(e, c, ref); ops.Describe(err).Status != http.StatusForbidden {
					t.Fatalf("%s (sre, no approver grant on prod) approves: %v, want 403", name, err)
				}
				if e.events() != before || v.state(e, ref) != v.waiting {
					t.Fatalf("%s's refused approval changed something", name)
				}
			}
			// The people listed can approve: lee, by the label grant.
			lee, err := e.ops.Identify(ctx, "lee", nil, nil, "192.0.2.21")
			if err != nil {
				t.Fatal(err)
			}
			if err := v.approve(e, lee, ref); err != nil {
				t.Fatal(err)
			}
			if got := v.state(e, ref); got != v.done {
				t.Fatalf("dana and lee left it %s, want %s", got, v.done)
			}
		})
	}
}
