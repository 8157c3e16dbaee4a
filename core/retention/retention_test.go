package retention

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

type env struct {
	t   *testing.T
	dir string
	st  *sqlite.Store
	now time.Time
}

func setup(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{t: t, dir: dir, st: st, now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

// load stores n actions of one round, as a busy core would: created, run and
// finished (each with three history lines and three events), all at e.now.
// The last one is left RUNNING when open is set.
func (e *env) load(n int, open bool) []string {
	e.t.Helper()
	ctx := context.Background()
	var ids []string
	args := json.RawMessage(fmt.Sprintf(`{"payload":%q}`, make([]byte, 200)))
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			state := action.Done
			if open && i == n-1 {
				state = action.Running
			}
			r := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "c", NodeID: "n1", Kind: "a/b",
				Args: args, State: state, Origin: action.OriginCore, Output: "pong", CreatedTS: e.now, UpdatedTS: e.now}}
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			for _, to := range []action.State{action.PendingSchedule, action.Running, state} {
				if err := tx.AppendHistory(ctx, r.ID, action.Transition{TS: e.now, To: to, Actor: "n1"}); err != nil {
					return err
				}
				if err := tx.AppendEvent(ctx, &store.Event{TS: e.now, Type: store.EventActionStateChanged, Actor: "n1",
					ClusterID: "c", NodeID: "n1", ActionID: r.ID, Message: "→ " + string(to)}); err != nil {
					return err
				}
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// size checkpoints the WAL into core.db and returns the file's size.
func (e *env) size() int64 {
	e.t.Helper()
	file := filepath.Join(e.dir, sqlite.FileName)
	db, err := sql.Open("sqlite3", "file:"+file+"?_busy_timeout=5000")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		e.t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		e.t.Fatal(err)
	}
	return fi.Size()
}

func (e *env) count(q string) int {
	e.t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(e.dir, sqlite.FileName)+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// Under a steady load (the same number of actions finishing every hour,
// with their history and events), a retention of a few hours keeps core.db
// at the size it reaches once the first rounds have aged out: freed pages
// are reused.
func TestCoreDBStaysBoundedUnderSteadyLoad(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const (
		perRound = 150
		rounds   = 16
		window   = 3 // rounds kept
	)
	p := New(Config{Retention: window * time.Hour, Batch: 100, Now: func() time.Time { return e.now }}, e.st, nil)
	var steady, largest int64
	for r := range rounds {
		e.load(perRound, false)
		if _, _, err := p.Purge(context.Background()); err != nil {
			t.Fatal(err)
		}
		size := e.size()
		switch {
		case r == 2*window:
			steady = size
		case r > 2*window:
			largest = max(largest, size)
		}
		e.now = e.now.Add(time.Hour)
	}
	if kept := e.count(`SELECT COUNT(*) FROM actions`); kept > (window+1)*perRound {
		t.Fatalf("%d actions kept, want at most %d", kept, (window+1)*perRound)
	}
	if hist, ev := e.count(`SELECT COUNT(*) FROM action_history`), e.count(`SELECT COUNT(*) FROM events`); hist > (window+1)*perRound*3 || ev > (window+1)*perRound*3 {
		t.Fatalf("%d history lines and %d events kept", hist, ev)
	}
	if largest > steady+steady/10 {
		t.Fatalf("core.db grew from %d bytes to %d under a steady load", steady, largest)
	}
	t.Logf("core.db: %d bytes at steady state, at most %d over the next %d rounds", steady, largest, rounds-2*window-1)
}

// Only finished actions and old events go; an open action stays whatever
// its age, and so does everything younger than the retention.
func TestPurgeKeepsOpenActionsAndRecentRows(t *testing.T) {
	t.Parallel()
	e := setup(t)
	old := e.load(3, true)
	e.now = e.now.Add(48 * time.Hour)
	recent := e.load(2, false)
	p := New(Config{Retention: 24 * time.Hour, Batch: 1, Now: func() time.Time { return e.now }}, e.st, nil)
	a, ev, err := p.Purge(context.Background())
	if err != nil || a != 2 || ev != 9 {
		t.Fatalf("purged %d actions and %d events (%v), want 2 and 9", a, ev, err)
	}
	ctx := context.Background()
	err = e.st.Read(ctx, func(r store.Reader) error {
		for _, id := range append([]string{old[2]}, recent...) {
			if _, err := r.Action(ctx, id); err != nil {
				return err
			}
		}
		if h, err := r.History(ctx, old[0]); err != nil || len(h) != 0 {
			return fmt.Errorf("history of a purged action: %v %v", h, err)
		}
		if h, err := r.History(ctx, old[2]); err != nil || len(h) != 3 {
			return fmt.Errorf("history of an open action: %v %v", h, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStartPurgesAndStopEnds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.load(2, false)
	e.now = e.now.Add(48 * time.Hour)
	p := New(Config{Retention: time.Hour, Every: time.Hour, Now: func() time.Time { return e.now }}, e.st, nil)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "Start to purge", func() bool { return e.count(`SELECT COUNT(*) FROM actions`) == 0 })
	p.Stop()
	p.Stop()
	if err := p.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

// Issue 33, item 7: a run that finished longer than the runs' retention
// ago goes whole, with its children; a recent one and an open one stay.
// The clock is injected.
func TestPurgeRunsTakesFinishedRunsWhole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	mk := func(state string, finished *time.Time) (string, string) {
		run := &store.Run{ID: action.NewID(), ClusterID: "c", State: state, Digest: "d", Stages: []store.RunStage{},
			CreatedTS: e.now, UpdatedTS: e.now, FinishedTS: finished}
		child := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "c", NodeID: "n1", Kind: "a/b",
			Args: json.RawMessage(`{}`), State: action.Done, Origin: action.OriginCore, CreatedTS: e.now, UpdatedTS: e.now}}
		child.RunID, child.Stage = run.ID, "main"
		if err := e.st.Update(ctx, func(tx store.Tx) error {
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
			return tx.InsertAction(ctx, child)
		}); err != nil {
			t.Fatal(err)
		}
		return run.ID, child.ID
	}
	longAgo, lately := e.now.Add(-40*24*time.Hour), e.now.Add(-time.Hour)
	oldRun, oldChild := mk(store.RunDone, &longAgo)
	newRun, _ := mk(store.RunFailed, &lately)
	openRun, _ := mk(store.RunRunning, nil)
	p := New(Config{Retention: 90 * 24 * time.Hour, Runs: 30 * 24 * time.Hour, Now: func() time.Time { return e.now }}, e.st, nil)
	n, err := p.PurgeRuns(ctx)
	if err != nil || n != 1 {
		t.Fatalf("PurgeRuns = %d, %v; want 1", n, err)
	}
	err = e.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Run(ctx, oldRun); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old run: %v", err)
		}
		if _, err := r.Action(ctx, oldChild); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old run's child: %v", err)
		}
		for _, id := range []string{newRun, openRun} {
			if _, err := r.Run(ctx, id); err != nil {
				t.Errorf("run %s: %v", id, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
