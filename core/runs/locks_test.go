package runs_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// startLocked creates, in cluster c, a run of the given stages (each over
// every node, one node at a time, when its target is empty) taking lock
// (nil: none), and has bob approve it.
func (env *engineEnv) startLocked(lock *wire.Lock, stages ...wire.StageSpec) *store.Run {
	env.t.Helper()
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		for i := range stages {
			if stages[i].Kind == "" && len(stages[i].Steps) == 0 {
				stages[i].Kind = "muster.io/debug.ping"
			}
			if stages[i].Target.Nodes == nil && stages[i].Target.Labels == nil {
				stages[i].Target.All = true
			}
			c := limit.MustParse("4")
			stages[i].MaxConcurrency = &c
		}
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: stages, Lock: lock}, actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		r, err = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return r
}

// finishAll ends every unfinished child of run id DONE and advances it.
func (env *engineEnv) finishAll(id string) *store.Run {
	env.t.Helper()
	for _, k := range env.children(id) {
		if !k.State.Final() {
			env.finishChild(k.ID, action.Done)
		}
	}
	return env.advance(id)
}

func TestARunWaitsForTheLockAnotherRunHolds(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	a := env.startLocked(&wire.Lock{Name: "db"}, wire.StageSpec{Name: "up"})
	if n := len(env.children(a.ID)); n != 4 {
		t.Fatalf("the holder made %d children, want 4", n)
	}
	b := env.startLocked(&wire.Lock{Name: "db", Scope: wire.LockCluster}, wire.StageSpec{Name: "up"})
	b = env.advance(b.ID)
	want := "waiting for lock db held by run " + a.ID
	if b.State != store.RunRunning || !strings.Contains(b.StateReason, want) || len(env.children(b.ID)) != 0 {
		t.Fatalf("the waiter: %s %q with %d children; want RUNNING, %q, none", b.State, b.StateReason,
			len(env.children(b.ID)), want)
	}
	// Another lock, or the same name in the global scope, does not wait.
	other := env.startLocked(&wire.Lock{Name: "db", Scope: wire.LockGlobal}, wire.StageSpec{Name: "up"})
	if n := len(env.children(other.ID)); n != 4 || strings.Contains(other.StateReason, "waiting") {
		t.Fatalf("a run of global lock db: %d children, %q; want 4, not waiting", n, other.StateReason)
	}
	if a = env.finishAll(a.ID); a.State != store.RunDone {
		t.Fatalf("the holder is %s, want DONE", a.State)
	}
	b = env.advance(b.ID)
	if n := len(env.children(b.ID)); n != 4 || strings.Contains(b.StateReason, "lock") {
		t.Fatalf("once the holder ended, the waiter has %d children and says %q; want 4, no lock", n, b.StateReason)
	}
}

func TestALockIsFreedByARunEndedInAnyFinalState(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	a := env.startLocked(&wire.Lock{Name: "db"}, wire.StageSpec{Name: "up"})
	b := env.startLocked(&wire.Lock{Name: "db"}, wire.StageSpec{Name: "up"})
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Cancel(ctx, tx, a.ID, actions.Actor{Name: "carol"}, "wrong version")
		return err
	})
	// The transaction that ended it released its lock.
	env.update(func(ctx context.Context, tx store.Tx) error {
		if held, err := tx.RunLocks(ctx, a.ID); err != nil || len(held) != 0 {
			t.Errorf("the cancelled run still holds %+v (%v)", held, err)
		}
		return nil
	})
	b = env.advance(b.ID)
	if n := len(env.children(b.ID)); n != 4 {
		t.Fatalf("after the holder's cancel the waiter has %d children, want 4 (%s %q)", n, b.State, b.StateReason)
	}
}

func TestAStageLockIsHeldWhileTheStageRuns(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	// a's first stage takes db; its second does not.
	a := env.startLocked(nil, wire.StageSpec{Name: "migrate", Lock: &wire.Lock{Name: "db"}},
		wire.StageSpec{Name: "restart"})
	b := env.startLocked(nil, wire.StageSpec{Name: "backup", Lock: &wire.Lock{Name: "db"}})
	b = env.advance(b.ID)
	if n := len(env.children(b.ID)); n != 0 || !strings.Contains(b.StateReason, "waiting for lock db held by run "+a.ID) ||
		b.Stages[0].State != store.StagePending {
		t.Fatalf("b while a's stage runs: %d children, %q, stage %s", n, b.StateReason, b.Stages[0].State)
	}
	a = env.finishAll(a.ID)
	if a.Stages[0].State != store.StageDone || a.Stages[1].State != store.StageRunning {
		t.Fatalf("a's stages: %s, %s", a.Stages[0].State, a.Stages[1].State)
	}
	b = env.advance(b.ID)
	if n := len(env.children(b.ID)); n != 4 || b.Stages[0].State != store.StageRunning {
		t.Fatalf("b once a's locked stage ended: %d children, stage %s, %q", n, b.Stages[0].State, b.StateReason)
	}
	// b holds db now: a run taking db waits for b, not for a.
	c := env.startLocked(&wire.Lock{Name: "db"}, wire.StageSpec{Name: "up"})
	if !strings.Contains(c.StateReason, "held by run "+b.ID) {
		t.Fatalf("c says %q, want it waiting for b %s", c.StateReason, b.ID)
	}
}

func TestLocksArePartOfTheDigest(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	create := func(lock *wire.Lock, stageLock *wire.Lock) string {
		var r *store.Run
		env.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Lock: lock, Stages: []wire.StageSpec{{
				Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, Lock: stageLock}}}, actions.Actor{Name: "alice"})
			return err
		})
		return r.Digest
	}
	none := create(nil, nil)
	seen := map[string]bool{none: true}
	for _, d := range []string{create(&wire.Lock{Name: "db"}, nil), create(&wire.Lock{Name: "db", Scope: "global"}, nil),
		create(nil, &wire.Lock{Name: "db"}), create(&wire.Lock{Name: "lb"}, nil)} {
		if seen[d] {
			t.Fatalf("two runs that lock differently have one digest %s", d)
		}
		seen[d] = true
	}
}

// A run waiting for a lock still has a deadline: past it, the waiter
// fails (it never started), and the holder keeps its lock.
func TestARunWaitingForALockFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	a := env.startLocked(&wire.Lock{Name: "db"}, wire.StageSpec{Name: "up"})
	var b *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		b, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", DeadlineS: 60, Lock: &wire.Lock{Name: "db"},
			Stages: []wire.StageSpec{{Name: "up", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}},
			actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		b, err = env.e.Approve(ctx, tx, b.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	if b = env.advance(b.ID); !strings.Contains(b.StateReason, "waiting for lock db") {
		t.Fatalf("the waiter says %q", b.StateReason)
	}
	env.now = env.now.Add(2 * time.Minute)
	if b = env.advance(b.ID); b.State != store.RunFailed || !strings.Contains(b.StateReason, "deadline") {
		t.Fatalf("the waiter past its deadline: %s %q, want FAILED by its deadline", b.State, b.StateReason)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		if held, err := tx.RunLocks(ctx, a.ID); err != nil || len(held) != 1 {
			t.Errorf("the holder holds %+v (%v), want its lock", held, err)
		}
		return nil
	})
}

// A stage whose steps run a kind declaring a lock in the core's kinds:
// configuration takes that lock as if it said it: the plan shows it, a
// second run of the kind waits for it, and the stage takes every lock it
// needs or none, so a waiter holds nothing another run could wait for.
func TestAKindsLockIsTakenAsIfItsStageSaidIt(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	kinds := live.New(budget.Policy{Kinds: []budget.KindRule{
		{Kind: "example.com/db.*", Lock: &budget.KindLock{Name: "db"}},
		{Kind: "example.com/lb.drain", Lock: &budget.KindLock{Name: "lb", Scope: "global"}},
	}})
	env.e.SetKindLocks(kinds)
	steps := func(kinds ...string) []wire.StepSpec {
		var out []wire.StepSpec
		for i, k := range kinds {
			out = append(out, wire.StepSpec{Name: fmt.Sprintf("s%d", i), Kind: k})
		}
		return out
	}
	a := env.startLocked(nil, wire.StageSpec{Name: "migrate", Steps: steps("muster.io/debug.ping", "example.com/db.migrate")})
	want := []store.KindLock{{Lock: store.Lock{Name: "db", Scope: store.LockCluster}, Kinds: []string{"example.com/db.migrate"}}}
	if !reflect.DeepEqual(a.Stages[0].KindLocks, want) || len(env.children(a.ID)) == 0 {
		t.Fatalf("a's stage: kind locks %+v, %d children; want %+v and its children", a.Stages[0].KindLocks,
			len(env.children(a.ID)), want)
	}
	// A one-kind stage of another db kind waits for a.
	b := env.startLocked(nil, wire.StageSpec{Name: "backup", Kind: "example.com/db.backup"})
	b = env.advance(b.ID)
	if n := len(env.children(b.ID)); n != 0 || !strings.Contains(b.StateReason, "waiting for lock db held by run "+a.ID) {
		t.Fatalf("b while a runs: %d children, %q; want none, waiting for db held by a", n, b.StateReason)
	}
	// c needs lb and db: db is a's, so c waits and holds neither; d, of
	// lb alone, runs at once.
	c := env.startLocked(nil, wire.StageSpec{Name: "move", Steps: steps("example.com/lb.drain", "example.com/db.migrate")})
	c = env.advance(c.ID)
	if n := len(env.children(c.ID)); n != 0 || !strings.Contains(c.StateReason, "db held by run "+a.ID) {
		t.Fatalf("c while a runs: %d children, %q", n, c.StateReason)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		if held, err := tx.RunLocks(ctx, c.ID); err != nil || len(held) != 0 {
			t.Errorf("c, waiting, holds %+v (%v), want nothing", held, err)
		}
		return nil
	})
	d := env.startLocked(nil, wire.StageSpec{Name: "drain", Kind: "example.com/lb.drain"})
	if n := len(env.children(d.ID)); n == 0 || strings.Contains(d.StateReason, "waiting") {
		t.Fatalf("d of lb alone: %d children, %q; want it running", n, d.StateReason)
	}
	for range 3 { // a step at a time
		a = env.finishAll(a.ID)
	}
	if a.State != store.RunDone {
		t.Fatalf("a is %s, want DONE", a.State)
	}
	if b = env.advance(b.ID); len(env.children(b.ID)) == 0 {
		t.Fatalf("once a ended, b has no children: %q", b.StateReason)
	}
	// A run holding a lock of its own from start to end takes no lock a
	// kind declares (two such runs could wait for each other for ever).
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Lock: &wire.Lock{Name: "maint"},
			Stages: []wire.StageSpec{{Kind: "example.com/db.migrate", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"})
		if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "kind example.com/db.migrate takes lock db") {
			t.Errorf("a run of lock maint over a kind of lock db: %v, want it refused", err)
		}
		return nil
	})
}

// lockWrites is a transaction that counts the lock rows it writes: a lock
// taken by the run it advances, a lock released.
type lockWrites struct {
	store.Tx
	writes int
}

func (tx *lockWrites) TakeRunLock(ctx context.Context, key, runID, stage string, t time.Time) (store.RunLock, error) {
	before, err := tx.Tx.RunLock(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.RunLock{}, err
	}
	h, err := tx.Tx.TakeRunLock(ctx, key, runID, stage, t)
	if err == nil && h != before {
		tx.writes++
	}
	return h, err
}

func (tx *lockWrites) ReleaseRunLock(ctx context.Context, key, runID string) (bool, error) {
	ok, err := tx.Tx.ReleaseRunLock(ctx, key, runID)
	if ok {
		tx.writes++
	}
	return ok, err
}

// A stage needing two locks, one free and one another run's, waits
// holding neither, and its passes while it waits write no lock: it reads
// who holds them rather than taking the free one and giving it back.
func TestAStageWaitingForOneOfItsLocksWritesNothing(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	env.e.SetKindLocks(live.New(budget.Policy{Kinds: []budget.KindRule{
		{Kind: "example.com/db.*", Lock: &budget.KindLock{Name: "db"}},
		{Kind: "example.com/lb.drain", Lock: &budget.KindLock{Name: "lb", Scope: "global"}},
	}}))
	a := env.startLocked(nil, wire.StageSpec{Name: "migrate", Kind: "example.com/db.migrate"})
	c := env.startLocked(nil, wire.StageSpec{Name: "move", Steps: []wire.StepSpec{
		{Name: "drain", Kind: "example.com/lb.drain"}, {Name: "migrate", Kind: "example.com/db.migrate"}}})
	for i := range 3 {
		tx := &lockWrites{}
		env.update(func(ctx context.Context, inner store.Tx) error {
			tx.Tx = inner
			_, err := env.e.AdvanceNodes(ctx, tx, c.ID)
			return err
		})
		if tx.writes != 0 {
			t.Fatalf("pass %d of the waiting stage wrote %d lock row(s), want none", i, tx.writes)
		}
	}
	c = env.run(c.ID)
	if n := len(env.children(c.ID)); n != 0 || !strings.Contains(c.StateReason, "db held by run "+a.ID) {
		t.Fatalf("c while a runs: %d children, %q", n, c.StateReason)
	}
	// Once a ends, c takes both.
	for range 3 {
		a = env.finishAll(a.ID)
	}
	if a.State != store.RunDone {
		t.Fatalf("a is %s, want DONE", a.State)
	}
	tx := &lockWrites{}
	env.update(func(ctx context.Context, inner store.Tx) error {
		tx.Tx = inner
		_, err := env.e.AdvanceNodes(ctx, tx, c.ID)
		return err
	})
	if tx.writes != 2 || len(env.children(c.ID)) == 0 {
		t.Fatalf("once a ended, c wrote %d lock row(s) and has %d children; want 2 and its children", tx.writes,
			len(env.children(c.ID)))
	}
}
