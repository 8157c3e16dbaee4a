package recur_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

const doc = `name: patch
params:
  - {name: seconds, type: int, default: 1}
stages:
  - name: main
    kind: muster.io/debug.sleep
    target: {all: true}
    args: {seconds: "{{ .seconds }}"}
`

type env struct {
	t   *testing.T
	st  store.Store
	svc *recur.Service
	w   *recur.Worker
	now time.Time
	mu  sync.Mutex
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) set(t time.Time) {
	e.mu.Lock()
	e.now = t
	e.mu.Unlock()
}

func TestMain(m *testing.M) { pgtest.Main(m) }

func setup(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return setupOn(t, st)
}

// worker is a worker on st with e's clock.
func (e *env) worker(st store.Store) *recur.Worker {
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol), Now: e.clock}, e.clock)
	return recur.New(recur.Config{Runs: engine, Now: e.clock}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func setupOn(t *testing.T, st store.Store) *env {
	t.Helper()
	e := &env{t: t, st: st, now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	e.svc = &recur.Service{Policy: live.New(approval.DefaultPolicy()), Now: e.clock}
	e.w = e.worker(st)
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		// bob approves; his token is what keeps his approvals alive.
		if err := tx.InsertToken(ctx, &store.Token{Name: "bob", Roles: []string{store.RoleApprover}, Hash: "hash-bob",
			CreatedTS: e.now}); err != nil {
			return err
		}
		for _, n := range []string{"n1", "n2"} {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: n, Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.apply(doc, "carol")
	return e
}

func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) error {
	e.t.Helper()
	ctx := context.Background()
	return e.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) })
}

func (e *env) apply(d, who string) {
	e.t.Helper()
	p, err := playbook.Parse([]byte(d))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		_, _, err := playbook.Apply(ctx, tx, d, p, who)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
}

func req() *wire.CreateScheduleRequest {
	return &wire.CreateScheduleRequest{Name: "nightly", Cluster: "c", Playbook: "patch", Cron: "0 2 * * *",
		Timezone: "Europe/Berlin", Params: map[string]string{"seconds": "2"}}
}

func (e *env) create(r *wire.CreateScheduleRequest, who string) (*store.Schedule, string, error) {
	var sc *store.Schedule
	var outcome string
	err := e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		sc, outcome, err = e.svc.Apply(ctx, tx, r, actions.Actor{Name: who})
		return err
	})
	return sc, outcome, err
}

func (e *env) approve(name, digest, who string) (*store.Schedule, error) {
	var sc *store.Schedule
	err := e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		sc, err = e.svc.Approve(ctx, tx, name, digest, actions.Actor{Name: who})
		return err
	})
	return sc, err
}

func (e *env) schedule(name string) *store.Schedule {
	e.t.Helper()
	var sc *store.Schedule
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		sc, err = r.Schedule(context.Background(), name)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return sc
}

func (e *env) runsOf(sc *store.Schedule) []store.Run {
	e.t.Helper()
	var out []store.Run
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		out, err = r.ScheduleRuns(context.Background(), sc.ID, 100)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) events(typ string) []store.Event {
	e.t.Helper()
	var out []store.Event
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		evs, err := r.Events(context.Background(), 0, 10000)
		for _, ev := range evs {
			if ev.Type == typ {
				out = append(out, ev)
			}
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// active creates and approves a schedule of r.
func (e *env) active(r *wire.CreateScheduleRequest) *store.Schedule {
	e.t.Helper()
	if _, _, err := e.create(r, "alice"); err != nil {
		e.t.Fatal(err)
	}
	sc, err := e.approve(r.Name, "", "bob")
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

func TestApplyRefusesBadInputNamingTheFieldAndStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, c := range map[string]struct {
		mod   func(r *wire.CreateScheduleRequest)
		field string
	}{
		"bad cron":          {func(r *wire.CreateScheduleRequest) { r.Cron = "61 * * * *" }, "cron"},
		"empty cron":        {func(r *wire.CreateScheduleRequest) { r.Cron = "" }, "cron"},
		"bad zone":          {func(r *wire.CreateScheduleRequest) { r.Timezone = "Mars/Olympus" }, "timezone"},
		"unknown playbook":  {func(r *wire.CreateScheduleRequest) { r.Playbook = "nope" }, "playbook"},
		"unknown version":   {func(r *wire.CreateScheduleRequest) { r.Version = 7 }, "version"},
		"unknown cluster":   {func(r *wire.CreateScheduleRequest) { r.Cluster = "nope" }, "cluster"},
		"undeclared param":  {func(r *wire.CreateScheduleRequest) { r.Params = map[string]string{"reboot": "yes"} }, "params"},
		"ill-typed param":   {func(r *wire.CreateScheduleRequest) { r.Params = map[string]string{"seconds": "soon"} }, "params"},
		"bad concurrency":   {func(r *wire.CreateScheduleRequest) { r.Concurrency = "queue" }, "concurrency"},
		"bad catch_up":      {func(r *wire.CreateScheduleRequest) { r.CatchUp = "forever" }, "catch_up"},
		"negative catch_up": {func(r *wire.CreateScheduleRequest) { r.CatchUp = "-1m" }, "catch_up"},
		"bad name":          {func(r *wire.CreateScheduleRequest) { r.Name = "../x" }, "name"},
	} {
		r := req()
		c.mod(r)
		_, _, err := e.create(r, "alice")
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("%s: %v, want a FieldError on %s", name, err, c.field)
		}
	}
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		list, err := r.Schedules(context.Background())
		if len(list) != 0 {
			t.Errorf("stored %d schedules from bad input", len(list))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalTakesAnotherPersonAndTheDigestShown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sc, outcome, err := e.create(req(), "alice")
	if err != nil || outcome != recur.Created || sc.State != store.SchedulePendingApprove {
		t.Fatalf("create: %v %s %v", sc, outcome, err)
	}
	if len(e.events(store.EventApprovalWaiting)) != 1 {
		t.Errorf("no approval.waiting for a new schedule")
	}
	if _, err := e.approve("nightly", "", "alice"); !errors.Is(err, recur.ErrForbidden) {
		t.Errorf("approval by its creator: %v, want ErrForbidden", err)
	}
	if _, err := e.approve("nightly", "", "carol"); !errors.Is(err, recur.ErrForbidden) {
		t.Errorf("approval by the playbook's applier: %v, want ErrForbidden", err)
	}
	if _, err := e.approve("nightly", "0000", "bob"); !errors.Is(err, recur.ErrWrongState) {
		t.Errorf("approval of another digest: %v, want ErrWrongState", err)
	}
	got, err := e.approve("nightly", sc.Digest, "bob")
	if err != nil || got.State != store.ScheduleActive || got.ApprovedBy != "bob" || got.ApprovedVersion != 1 {
		t.Fatalf("approve: %+v %v", got, err)
	}
	if _, err := e.approve("nightly", "", "bob"); !errors.Is(err, recur.ErrWrongState) {
		t.Errorf("second approval: %v, want ErrWrongState", err)
	}
	// The same schedule again changes nothing; a change needs approval again.
	if _, outcome, _ := e.create(req(), "alice"); outcome != recur.Unchanged || e.schedule("nightly").State != store.ScheduleActive {
		t.Errorf("the same schedule again: %s, %s", outcome, e.schedule("nightly").State)
	}
	r := req()
	r.Cron = "0 3 * * *"
	if _, outcome, err := e.create(r, "dave"); err != nil || outcome != recur.Changed {
		t.Fatalf("change: %s %v", outcome, err)
	}
	if got := e.schedule("nightly"); got.State != store.SchedulePendingApprove || got.Requester != "dave" {
		t.Errorf("after a change: %s by %s, want PENDING_APPROVE by dave", got.State, got.Requester)
	}
}

func TestAnOccurrenceMakesOneApprovedRunWhateverHowManyWorkersTry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sc := e.active(req())
	// 02:00 Berlin is 01:00 UTC on 24 November.
	at := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	e.set(at.Add(2 * time.Second))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.w.Pass(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	list := e.runsOf(sc)
	if len(list) != 1 {
		t.Fatalf("%d runs for one occurrence, want 1", len(list))
	}
	run := list[0]
	if run.ID != schedule.RunID(sc.ID, at) || run.State != store.RunRunning || run.ScheduleID != sc.ID {
		t.Errorf("run %+v: want id %s, RUNNING, schedule %s", run, schedule.RunID(sc.ID, at), sc.ID)
	}
	var full *store.Run
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		full, err = r.Run(context.Background(), run.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if full.ApprovedBy != "bob" || full.Requester != "alice" {
		t.Errorf("run approved by %q, requested by %q; want bob, alice", full.ApprovedBy, full.Requester)
	}
	// Occur straight on the same occurrence (a restarted core): no new run.
	if err := e.w.Occur(context.Background(), "nightly", at, true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(sc)); n != 1 || len(e.events(store.EventScheduleOccurrence)) != 1 {
		t.Errorf("after a second Occur: %d runs, %d occurrence events; want 1, 1", n, len(e.events(store.EventScheduleOccurrence)))
	}
}

func TestMissedOccurrencesRunOnlyTheLatestWithinCatchUp(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone, r.Concurrency = "*/10 * * * *", "", store.ConcurrencyAllow
	sc := e.active(r) // at 10:00
	// Down from 10:05 to 10:34: 10:10 and 10:20 are older than catch_up.
	e.set(time.Date(2026, 11, 23, 10, 34, 0, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	list := e.runsOf(sc)
	if len(list) != 1 || list[0].ID != schedule.RunID(sc.ID, time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("runs %v: want only the 10:30 one", list)
	}
	// Down from 10:35 to 10:55: 10:40 and 10:50 both older than 10 min? 10:50 is 5 min old: it runs.
	e.set(time.Date(2026, 11, 23, 11, 11, 0, 0, time.UTC)) // 11:10 is 1 min old, 11:00 and 10:40, 10:50 are missed
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if list := e.runsOf(sc); len(list) != 2 || list[0].ID != schedule.RunID(sc.ID, time.Date(2026, 11, 23, 11, 10, 0, 0, time.UTC)) {
		t.Fatalf("runs %v: want 10:30 and 11:10", list)
	}
	// Down past catch_up entirely: nothing runs late.
	e.set(time.Date(2026, 11, 23, 11, 29, 0, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(sc)); n != 3 {
		t.Fatalf("%d runs, want 3 (11:20 is 9 min old, within catch_up)", n)
	}
	e.set(time.Date(2026, 11, 23, 11, 45, 0, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(sc)); n != 4 {
		t.Fatalf("%d runs, want 4 (11:40 is 5 min old)", n)
	}
	r2 := req()
	r2.Name, r2.Cron, r2.Timezone, r2.CatchUp = "strict", "*/10 * * * *", "", "0s"
	strict := e.active(r2)
	e.set(time.Date(2026, 11, 23, 11, 52, 0, 0, time.UTC)) // 11:50, 2 min old: more than Grace
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(strict)); n != 0 {
		t.Fatalf("catch_up 0s ran %d occurrence(s) 2 min late", n)
	}
}

func TestForbidSkipsAnOccurrenceWhileThePreviousRunIsOpen(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone = "*/10 * * * *", ""
	sc := e.active(r)
	e.set(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.set(time.Date(2026, 11, 23, 10, 20, 1, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(sc)); n != 1 {
		t.Fatalf("%d runs, want 1: the 10:20 occurrence is skipped while the 10:10 run is open", n)
	}
	if sk := e.events(store.EventScheduleSkipped); len(sk) != 1 || sk[0].Data["reason"] != "previous run open" {
		t.Fatalf("skipped events %v, want one saying the previous run is open", sk)
	}
}

func TestANewPlaybookVersionUnderLatestSendsItBackToApproval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone = "*/10 * * * *", ""
	sc := e.active(r)
	e.apply(doc+"# v2\n", "carol")
	e.set(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := e.schedule("nightly")
	if got.State != store.SchedulePendingApprove || len(e.runsOf(sc)) != 0 {
		t.Fatalf("after playbook v2: %s with %d runs, want PENDING_APPROVE and none", got.State, len(e.runsOf(sc)))
	}
	if len(e.events(store.EventScheduleUnapproved)) != 1 || len(e.events(store.EventApprovalWaiting)) != 2 {
		t.Errorf("want one schedule.unapproved and a second approval.waiting")
	}
	if _, err := e.approve("nightly", "", "bob"); err != nil {
		t.Fatal(err)
	}
	e.set(time.Date(2026, 11, 23, 10, 20, 1, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	list := e.runsOf(sc)
	if len(list) != 1 {
		t.Fatalf("%d runs after approval, want 1", len(list))
	}
	var full *store.Run
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		full, err = r.Run(context.Background(), list[0].ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if full.PlaybookVersion != 2 {
		t.Errorf("run of playbook version %d, want 2", full.PlaybookVersion)
	}
}

// occurAt moves the clock to at and runs one pass of the worker.
func (e *env) occurAt(at time.Time) {
	e.t.Helper()
	e.set(at)
	if err := e.w.Pass(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func TestAScheduleWhoseApproverMayNoLongerApproveStopsMakingRuns(t *testing.T) {
	t.Parallel()
	for name, gone := range map[string]func(ctx context.Context, tx store.Tx) error{
		"token revoked": func(ctx context.Context, tx store.Tx) error { return tx.DeleteToken(ctx, "bob") },
		"role lost": func(ctx context.Context, tx store.Tx) error {
			if err := tx.DeleteToken(ctx, "bob"); err != nil {
				return err
			}
			return tx.InsertToken(ctx, &store.Token{Name: "bob", Roles: []string{store.RoleViewer}, Hash: "hash-bob2",
				CreatedTS: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)})
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			r := req()
			r.Cron, r.Timezone = "*/10 * * * *", ""
			sc := e.active(r)
			e.occurAt(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
			if n := len(e.runsOf(sc)); n != 1 {
				t.Fatalf("%d runs while bob may approve, want 1", n)
			}
			if err := e.update(gone); err != nil {
				t.Fatal(err)
			}
			e.occurAt(time.Date(2026, 11, 23, 10, 20, 1, 0, time.UTC))
			got := e.schedule("nightly")
			if got.State != store.SchedulePendingApprove || !strings.Contains(got.StateReason, "bob") {
				t.Fatalf("schedule %s (%q), want PENDING_APPROVE naming its approver", got.State, got.StateReason)
			}
			if n := len(e.runsOf(sc)); n != 1 {
				t.Errorf("%d runs after the approver went, want still 1", n)
			}
			un := e.events(store.EventScheduleUnapproved)
			if len(un) != 1 || un[0].Data["reason"] != "approver gone" {
				t.Errorf("schedule.unapproved events %+v, want one with reason approver gone", un)
			}
			if n := len(e.events(store.EventApprovalWaiting)); n != 2 {
				t.Errorf("%d approval.waiting events, want 2 (created, sent back)", n)
			}
			e.occurAt(time.Date(2026, 11, 23, 10, 30, 1, 0, time.UTC))
			if n := len(e.runsOf(sc)); n != 1 {
				t.Errorf("%d runs while waiting for approval, want 1", n)
			}
		})
	}
}

func TestRevokingTheApproversTokenSendsItsSchedulesBackAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.active(req())
	other := req()
	other.Name = "weekly"
	e.active(other)
	// While bob's token still approves, asking changes nothing.
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		got, err := recur.Unapproved(ctx, tx, "bob", e.clock())
		if err == nil && len(got) != 0 {
			t.Errorf("sent back %v while their approver's token still approves", got)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nightly", "weekly"} {
		if got := e.schedule(n); got.State != store.ScheduleActive {
			t.Fatalf("%s is %s while its approver's token still approves, want ACTIVE", n, got.State)
		}
	}
	var sent []string
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteToken(ctx, "bob"); err != nil {
			return err
		}
		var err error
		sent, err = recur.Unapproved(ctx, tx, "bob", e.clock())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("sent back %v, want both schedules", sent)
	}
	for _, n := range []string{"nightly", "weekly"} {
		if got := e.schedule(n); got.State != store.SchedulePendingApprove {
			t.Errorf("%s is %s, want PENDING_APPROVE", n, got.State)
		}
	}
}

func TestPausedSchedulesMakeNoRunsAndResumeFromTheNextOccurrence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone, r.Concurrency = "*/10 * * * *", "", store.ConcurrencyAllow
	sc := e.active(r)
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := e.svc.Pause(ctx, tx, "nightly", actions.Actor{Name: "alice"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.occurAt(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		_, err := e.svc.Resume(ctx, tx, "nightly", actions.Actor{Name: "alice"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runsOf(sc)); n != 0 {
		t.Fatalf("%d runs for an occurrence while paused", n)
	}
	e.occurAt(time.Date(2026, 11, 23, 10, 20, 1, 0, time.UTC))
	if n := len(e.runsOf(sc)); n != 1 {
		t.Fatalf("%d runs after resume, want 1", n)
	}
}

// Two replicas on one PostgreSQL database, two workers each, all looking at
// the schedules at the same moments: each occurrence makes one run and one
// schedule.occurrence event.
func TestReplicasOnPostgreSQLMakeOneRunPerOccurrence(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	var stores []store.Store
	for range 2 {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores = append(stores, st)
	}
	e := setupOn(t, stores[0])
	r := req()
	r.Cron, r.Timezone, r.Concurrency = "*/10 * * * *", "", store.ConcurrencyAllow
	sc := e.active(r)
	workers := []*recur.Worker{e.worker(stores[0]), e.worker(stores[0]), e.worker(stores[1]), e.worker(stores[1])}
	for k := 1; k <= 5; k++ {
		e.set(time.Date(2026, 11, 23, 10, 10*k, 1, 0, time.UTC))
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Pass(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := len(e.runsOf(sc)); n != k {
			t.Fatalf("after occurrence %d: %d runs", k, n)
		}
	}
	if n := len(e.events(store.EventScheduleOccurrence)); n != 5 {
		t.Fatalf("%d schedule.occurrence events for 5 occurrences", n)
	}
}

// TestApplyRefusesParamsThatBreakAKindsArgsSchema: params are checked as
// muster playbook plan checks them, args_schema included, so a schedule
// whose every occurrence would be refused is never stored.
func TestApplyRefusesParamsThatBreakAKindsArgsSchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n2", Addr: "127.0.0.1:1", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.sleep"},
			ArgsSchemas: map[string]json.RawMessage{"muster.io/debug.sleep": json.RawMessage(
				`{"type":"object","properties":{"seconds":{"type":"integer","maximum":10}}}`)}})
	}); err != nil {
		t.Fatal(err)
	}
	r := req()
	r.Params = map[string]string{"seconds": "99"}
	_, _, err := e.create(r, "alice")
	var fe *schedule.FieldError
	if !errors.As(err, &fe) || fe.Field != "params" || !strings.Contains(err.Error(), "args.seconds") {
		t.Fatalf("create = %v, want a FieldError on params naming args.seconds", err)
	}
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		if _, err := rd.Schedule(context.Background(), r.Name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("schedule stored from params its kind refuses (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.Params = map[string]string{"seconds": "5"}
	if _, _, err := e.create(r, "alice"); err != nil {
		t.Fatalf("create with params the schema accepts: %v", err)
	}
}

// TestApplyRefusesAPlaybookWhoseRunLockMeetsAKindsLock: Apply plans with
// the locks kinds declare now, as each occurrence does, so a playbook
// holding a lock for the whole run whose kind declares another is refused
// at apply, not at every occurrence.
func TestApplyRefusesAPlaybookWhoseRunLockMeetsAKindsLock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol), Now: e.clock}, e.clock)
	engine.SetKindLocks(live.New(budget.Policy{Kinds: []budget.KindRule{
		{Kind: "muster.io/debug.sleep", Lock: &budget.KindLock{Name: "db"}}}}))
	e.svc.KindLocks = engine.KindLocks
	e.apply(strings.Replace(doc, "name: patch\n", "name: patch\nlock: maint\n", 1), "carol")
	_, _, err := e.create(req(), "alice")
	var fe *schedule.FieldError
	if !errors.As(err, &fe) || fe.Field != "params" || !strings.Contains(err.Error(), "lock db") {
		t.Fatalf("create = %v, want a FieldError on params naming lock db", err)
	}
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		if _, err := rd.Schedule(context.Background(), "nightly"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("schedule stored though every occurrence would be refused (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Without the run's lock the kind's lock is the stage's: accepted.
	e.apply(doc, "carol")
	if _, _, err := e.create(req(), "alice"); err != nil {
		t.Fatalf("create without a run lock: %v", err)
	}
}

// TestAScheduleWhosePlaybookIsGoneWaitsAndTheOthersGoOn: a schedule whose
// playbook cannot be found goes back to approval saying so, once; the pass
// does not fail, and another schedule still makes its run.
func TestAScheduleWhosePlaybookIsGoneWaitsAndTheOthersGoOn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone = "*/10 * * * *", ""
	e.active(r)
	other := req()
	other.Name, other.Cron, other.Timezone = "other", "*/10 * * * *", ""
	sc := e.active(other)
	if err := e.update(func(ctx context.Context, tx store.Tx) error {
		s, err := tx.Schedule(ctx, "nightly")
		if err != nil {
			return err
		}
		s.Playbook = "vanished"
		return tx.UpdateSchedule(ctx, s)
	}); err != nil {
		t.Fatal(err)
	}
	e.occurAt(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
	got := e.schedule("nightly")
	if got.State != store.SchedulePendingApprove || !strings.Contains(got.StateReason, "playbook vanished") {
		t.Fatalf("schedule of a vanished playbook: %s %q, want PENDING_APPROVE saying so", got.State, got.StateReason)
	}
	if n := len(e.runsOf(sc)); n != 1 {
		t.Fatalf("the other schedule made %d runs, want 1", n)
	}
	e.occurAt(time.Date(2026, 11, 23, 10, 20, 1, 0, time.UTC))
	if n := len(e.events(store.EventScheduleUnapproved)); n != 1 {
		t.Fatalf("%d schedule.unapproved events, want 1", n)
	}
}

// TestAnOccurrenceWhosePlanFailedOnNodesThatChangedIsPlannedAgain: a plan
// that failed on the cluster's nodes is re-checked against them in the
// write transaction like one that succeeded: when a node changed while it
// was planned, the run is planned again on the nodes as they are, rather
// than the occurrence being skipped for what no longer holds.
func TestAnOccurrenceWhosePlanFailedOnNodesThatChangedIsPlannedAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := req()
	r.Cron, r.Timezone = "*/10 * * * *", ""
	sc := e.active(r)
	schema := func(max int) func(ctx context.Context, tx store.Tx) error {
		return func(ctx context.Context, tx store.Tx) error {
			return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n2", Addr: "127.0.0.1:1", Source: store.SourceStatic,
				Status: store.NodeUp, Kinds: []string{"muster.io/debug.sleep"},
				ArgsSchemas: map[string]json.RawMessage{"muster.io/debug.sleep": json.RawMessage(
					fmt.Sprintf(`{"type":"object","properties":{"seconds":{"type":"integer","maximum":%d}}}`, max))}})
		}
	}
	// The nodes refuse seconds 2 when the run is planned, and accept it
	// before the plan is stored.
	if err := e.update(schema(1)); err != nil {
		t.Fatal(err)
	}
	once := false
	recur.SetPlanned(e.w, func() {
		if !once {
			once = true
			if err := e.update(schema(10)); err != nil {
				t.Error(err)
			}
		}
	})
	e.set(time.Date(2026, 11, 23, 10, 10, 1, 0, time.UTC))
	if err := e.w.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sk := e.events(store.EventScheduleSkipped); len(sk) != 0 {
		t.Fatalf("skipped: %q, from nodes that had changed", sk[0].Message)
	}
	if n := len(e.runsOf(sc)); n != 1 {
		t.Fatalf("%d runs, want the occurrence's run planned again on the nodes as they are", n)
	}
}
