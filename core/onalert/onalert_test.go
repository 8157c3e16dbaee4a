package onalert_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/onalert"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/live"
)

const doc = `name: restart-missing
params:
  - {name: missing, type: string}
  - {name: service, type: string, default: web}
stages:
  - name: restart
    kind: muster.io/debug.ping
    target: {all: true}
    unavailable: skip
    args: {note: "restart {{ .service }} for {{ .missing }}"}
`

type env struct {
	t       *testing.T
	st      *sqlite.Store
	w       *onalert.Worker
	members *live.Value[nodes.Membership]
	now     time.Time
}

// setup is cluster prod declaring n1 and n2 (grace 1 s) with an on_alert
// playbook, n1 UP and n2 DOWN for a minute, and the cluster status given.
func setup(t *testing.T, status string) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, now: time.Now().UTC()}
	clock := func() time.Time { return e.now }
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol), Now: clock}, clock)
	e.members = live.New(nodes.Membership{"prod": {Nodes: []string{"n1", "n2"}, Grace: time.Second,
		OnAlert: &nodes.OnAlert{Playbook: "restart-missing", Params: map[string]string{"service": "api"}}}})
	e.w = onalert.New(onalert.Config{Runs: engine, Members: e.members, Now: clock}, st, nil)
	past := e.now.Add(-time.Minute)
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: status, UpdatedTS: e.now}); err != nil {
			return err
		}
		for _, n := range []store.Node{
			{ClusterID: "prod", ID: "n1", Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp, UpdatedTS: past, LastContact: &past},
			{ClusterID: "prod", ID: "n2", Addr: "127.0.0.1:2", Source: store.SourceStatic, Status: store.NodeDown, UpdatedTS: past, LastContact: &past},
		} {
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return tx.InsertPlaybook(ctx, &store.Playbook{Name: "restart-missing", Version: 1, Document: doc, Digest: playbook.Digest(doc), CreatedBy: "root"})
	})
	if _, _, err := auth.CreateTokenWith(ctx, st, "bob", []string{store.RoleApprover}, auth.Options{}, "root", ""); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) check() {
	e.t.Helper()
	if err := e.w.Pass(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) approve() string {
	e.t.Helper()
	var d string
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		d, err = onalert.Approve(ctx, tx, "prod", e.members.Load()["prod"].OnAlert, "", actions.Actor{Name: "bob"}, e.now)
		return err
	})
	return d
}

func (e *env) runs() []store.Run {
	e.t.Helper()
	var out []store.Run
	e.update(func(ctx context.Context, tx store.Tx) error {
		list, err := tx.ListRuns(ctx, store.RunQuery{ClusterID: "prod"})
		out = list
		return err
	})
	return out
}

func (e *env) events(typ string) []store.Event {
	e.t.Helper()
	var out []store.Event
	e.update(func(ctx context.Context, tx store.Tx) error {
		evs, err := tx.Events(ctx, 0, 0)
		for _, ev := range evs {
			if ev.Type == typ {
				out = append(out, ev)
			}
		}
		return err
	})
	return out
}

func (e *env) setStatus(status string) {
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: status, UpdatedTS: e.now})
	})
}

// Issue 33, item 6: once approved, the on_alert playbook starts when the
// cluster is ALERT with a declared node missing, with the missing nodes
// as a parameter, once for the alert however often it is looked at; a new
// alert (after the cluster was HEALTHY) starts it again.
func TestOnAlertStartsOncePerAlert(t *testing.T) {
	t.Parallel()
	e := setup(t, store.ClusterHealthy)
	e.approve()
	e.check()
	if len(e.runs()) != 0 {
		t.Fatal("a run while the cluster is HEALTHY")
	}
	e.setStatus(store.ClusterAlert)
	for range 3 {
		e.check()
	}
	list := e.runs()
	if len(list) != 1 {
		t.Fatalf("%d runs for one alert, want 1", len(list))
	}
	r := list[0]
	if r.Playbook != "restart-missing" || r.ApprovedBy != "bob" || r.State != store.RunRunning {
		t.Fatalf("run %+v", r)
	}
	if !strings.Contains(string(r.Stages[0].Args), "restart api for n2") {
		t.Fatalf("args %s: want the missing node as the parameter", r.Stages[0].Args)
	}
	if evs := e.events(store.EventOnAlertStarted); len(evs) != 1 || evs[0].RunID != r.ID {
		t.Fatalf("started events %+v", evs)
	}
	// The alert ends, another begins while the first run goes: no second
	// run, one event saying why, and the first run's end is reported.
	e.setStatus(store.ClusterHealthy)
	e.check()
	e.setStatus(store.ClusterAlert)
	e.check()
	e.check()
	if list := e.runs(); len(list) != 1 {
		t.Fatalf("%d runs for an alert while the first run goes, want 1", len(list))
	}
	if evs := e.events(store.EventOnAlertSkipped); len(evs) != 1 || !strings.Contains(evs[0].Message, "previous recovery still running") {
		t.Fatalf("skipped events %+v, want one: previous recovery still running", evs)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		r.State = store.RunDone
		return tx.UpdateRun(ctx, r)
	})
	e.check()
	if evs := e.events(store.EventOnAlertFinished); len(evs) != 1 || evs[0].RunID != r.ID {
		t.Fatalf("finished events %+v, want the first run's", evs)
	}
	// Once it ended, a new alert starts a second run.
	e.setStatus(store.ClusterHealthy)
	e.check()
	e.setStatus(store.ClusterAlert)
	e.check()
	e.check()
	if list := e.runs(); len(list) != 2 {
		t.Fatalf("%d runs after a new alert, want 2", len(list))
	}
}

// writes counts the write transactions of a store.
type writes struct {
	store.Store
	n atomic.Int32
}

func (w *writes) Update(ctx context.Context, fn func(store.Tx) error) error {
	w.n.Add(1)
	return w.Store.Update(ctx, fn)
}

// A cluster that stays as it is, ALERT with its run going or HEALTHY,
// costs a look no write transaction.
func TestOnAlertUnchangedClusterWritesNothing(t *testing.T) {
	t.Parallel()
	for _, status := range []string{store.ClusterAlert, store.ClusterHealthy} {
		e := setup(t, status)
		e.approve()
		st := &writes{Store: e.st}
		pol := approval.DefaultPolicy()
		clock := func() time.Time { return e.now }
		w := onalert.New(onalert.Config{Runs: runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol), Now: clock}, clock),
			Members: e.members, Now: clock}, st, nil)
		if err := w.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		st.n.Store(0)
		for range 3 {
			if err := w.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := st.n.Load(); n != 0 {
			t.Fatalf("cluster %s unchanged: %d write transactions in 3 looks, want 0", status, n)
		}
	}
}

// A run that does not end DONE leaves the cluster ALERT, and an event (a
// notification) says so, once.
func TestOnAlertRunNotDoneSaysTheClusterStaysAlert(t *testing.T) {
	t.Parallel()
	e := setup(t, store.ClusterAlert)
	e.approve()
	e.check()
	list := e.runs()
	if len(list) != 1 {
		t.Fatalf("%d runs", len(list))
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Run(ctx, list[0].ID)
		if err != nil {
			return err
		}
		r.State, r.StateReason = store.RunFailed, "1 error"
		return tx.UpdateRun(ctx, r)
	})
	e.check()
	e.check()
	evs := e.events(store.EventOnAlertFinished)
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "ended FAILED") || !strings.Contains(evs[0].Message, "the cluster stays ALERT") {
		t.Fatalf("finished events %+v", evs)
	}
	if len(e.runs()) != 1 {
		t.Fatal("a second run for the same alert")
	}
}

// Without an approval, or with one voided by a change of the params or the
// playbook, nothing starts; the event says why and that the cluster stays
// ALERT.
func TestOnAlertNeedsAnApprovalOfWhatItIsNow(t *testing.T) {
	t.Parallel()
	e := setup(t, store.ClusterAlert)
	e.check()
	if len(e.runs()) != 0 {
		t.Fatal("a run without approval")
	}
	if evs := e.events(store.EventOnAlertSkipped); len(evs) != 1 || !strings.Contains(evs[0].Message, "nobody approved it") {
		t.Fatalf("skipped events %+v", evs)
	}
	e.approve()
	// The params change: the approval is void.
	m := e.members.Load()
	oa := *m["prod"].OnAlert
	oa.Params = map[string]string{"service": "db"}
	x := m["prod"]
	x.OnAlert = &oa
	e.members.Store(nodes.Membership{"prod": x})
	e.setStatus(store.ClusterHealthy)
	e.check()
	e.setStatus(store.ClusterAlert)
	e.check()
	if len(e.runs()) != 0 {
		t.Fatal("a run on a void approval")
	}
	if evs := e.events(store.EventOnAlertSkipped); len(evs) != 2 || !strings.Contains(evs[1].Message, "is void") {
		t.Fatalf("skipped events %+v", evs)
	}
	// A new playbook version voids it too.
	e.approve()
	e.update(func(ctx context.Context, tx store.Tx) error {
		d := doc + "# v2\n"
		return tx.InsertPlaybook(ctx, &store.Playbook{Name: "restart-missing", Version: 2, Document: d, Digest: playbook.Digest(d), CreatedBy: "root"})
	})
	e.setStatus(store.ClusterHealthy)
	e.check()
	e.setStatus(store.ClusterAlert)
	e.check()
	if len(e.runs()) != 0 {
		t.Fatal("a run after the playbook changed")
	}
}

// While the cluster stays ALERT, a missing node that is briefly not
// missing (its record changed, its grace counting again) neither ends the
// alert nor makes a second run.
func TestOnAlertOneAlertWhileTheClusterStaysAlert(t *testing.T) {
	t.Parallel()
	e := setup(t, store.ClusterAlert)
	e.approve()
	e.check()
	// n2's record changes now: within its grace it is not missing.
	e.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "n2")
		if err != nil {
			return err
		}
		n.StatusReason, n.UpdatedTS = "failed", e.now
		return tx.PutNode(ctx, n)
	})
	e.check()
	e.now = e.now.Add(time.Minute) // past its grace: missing again
	e.check()
	if list := e.runs(); len(list) != 1 {
		t.Fatalf("%d runs while the cluster stayed ALERT, want 1", len(list))
	}
}

// As a schedule's: an alert starts nothing once its approver may no
// longer approve (their token revoked); the event says why.
func TestOnAlertStartsNothingOnceItsApproverIsGone(t *testing.T) {
	t.Parallel()
	e := setup(t, store.ClusterAlert)
	e.approve()
	e.update(func(ctx context.Context, tx store.Tx) error { return tx.DeleteToken(ctx, "bob") })
	e.check()
	if n := len(e.runs()); n != 0 {
		t.Fatalf("%d runs on the approval of a revoked approver", n)
	}
	if evs := e.events(store.EventOnAlertSkipped); len(evs) != 1 || !strings.Contains(evs[0].Message, "revoked") {
		t.Fatalf("skipped events %+v", evs)
	}
}
