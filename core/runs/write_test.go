package runs_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// errRollBack ends a transaction so that nothing it did is stored.
var errRollBack = errors.New("roll back")

// runVerb is a change of a run a person or the core makes: set up brings
// a run to the state the verb takes and returns its id; do makes the
// change in tx and returns the id of the run it changed (a retry's new
// run); event is the type of the one event the change raises; changed says
// what the stored row must show.
type runVerb struct {
	name    string
	setUp   func(env *engineEnv) string
	do      func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error)
	event   string
	changed func(r *store.Run) bool
}

var (
	alice = actions.Actor{Name: "alice"}
	bob   = actions.Actor{Name: "bob"}
)

// created is a run of one stage over every node that alice created and no
// one approved yet.
func created(env *engineEnv) string {
	env.t.Helper()
	c, e := limit.MustParse("1"), limit.MustParse("0")
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
		}}}, alice)
		return err
	})
	if r.State != store.RunPendingApprove {
		env.t.Fatalf("created run is %s, want PENDING_APPROVE", r.State)
	}
	return r.ID
}

// running is a run alice created and bob approved, one child in flight.
func running(env *engineEnv) string { return env.start("1", "0", "").ID }

// paused is a running run bob paused.
func paused(env *engineEnv) string {
	id := running(env)
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Pause(ctx, tx, id, bob)
		return err
	})
	return id
}

// canary is a run paused after its canary node was done.
func canary(env *engineEnv) string {
	env.t.Helper()
	c, e := limit.MustParse("1"), limit.MustParse("0")
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, Canary: 1,
		}}}, alice)
		if err != nil {
			return err
		}
		_, err = env.e.Approve(ctx, tx, r.ID, "", bob)
		return err
	})
	env.finishChild(env.children(r.ID)[0].ID, action.Done)
	if r = env.advance(r.ID); store.RunPaused != r.State {
		env.t.Fatalf("canary run is %s (%s), want PAUSED after its canary", r.State, r.StateReason)
	}
	return r.ID
}

// failed is a run whose one child in flight failed, over max_errors 0.
func failed(env *engineEnv) string {
	id := running(env)
	env.finishChild(env.children(id)[0].ID, action.Failed)
	if r := env.advance(id); r.State != store.RunFailed {
		env.t.Fatalf("run is %s, want FAILED", r.State)
	}
	return id
}

// done is a running run whose children all succeeded, not yet advanced.
func done(env *engineEnv) string {
	r := env.start("100%", "0", "")
	for _, k := range env.children(r.ID) {
		env.finishChild(k.ID, action.Done)
	}
	return r.ID
}

func runVerbs() []runVerb {
	same := func(id string, r *store.Run, err error) (string, error) { return id, err }
	return []runVerb{
		// create makes a second run beside the one set up, which it leaves
		// as it was.
		{name: "create", setUp: created, event: store.EventRunCreated,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, _ string) (string, error) {
				c, e := limit.MustParse("1"), limit.MustParse("0")
				r, err := env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
					Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
				}}}, alice)
				if err != nil {
					return "", err
				}
				return r.ID, nil
			},
			changed: func(r *store.Run) bool { return r.State == store.RunPendingApprove && r.Requester == "alice" }},
		{name: "advance to its failure", setUp: func(env *engineEnv) string {
			id := running(env)
			env.finishChild(env.children(id)[0].ID, action.Failed)
			return id
		}, event: store.EventRunFinished,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				_, err := env.e.AdvanceNodes(ctx, tx, id)
				return id, err
			},
			changed: func(r *store.Run) bool { return r.State == store.RunFailed && r.FinishedTS != nil }},
		{name: "approve", setUp: created, event: store.EventRunApproved,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Approve(ctx, tx, id, "", bob)
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunRunning && r.ApprovedBy == "bob" }},
		{name: "reject", setUp: created, event: store.EventRunRejected,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Reject(ctx, tx, id, bob, "not now")
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunCancelled && r.FinishedTS != nil }},
		{name: "pause", setUp: running, event: store.EventRunPaused,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Pause(ctx, tx, id, bob)
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunPaused }},
		{name: "resume", setUp: paused, event: store.EventRunResumed,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Resume(ctx, tx, id, bob, true)
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunRunning }},
		{name: "promote", setUp: canary, event: store.EventRunPromoted,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Promote(ctx, tx, id, actions.Actor{Name: bob.Name, Note: "canary healthy"}, true)
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunRunning && r.Stages[0].Promoted }},
		{name: "cancel", setUp: running, event: store.EventRunCancelled,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Cancel(ctx, tx, id, bob, "")
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.State == store.RunCancelled && r.FinishedTS != nil }},
		{name: "urgent", setUp: running, event: store.EventRunUrgent,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.MarkUrgent(ctx, tx, id, actions.Actor{Name: "bob", Note: "outage"})
				return same(id, r, err)
			},
			changed: func(r *store.Run) bool { return r.Urgent == "outage" }},
		{name: "retry", setUp: failed, event: store.EventRunCreated,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				r, err := env.e.Retry(ctx, tx, id, alice)
				if err != nil {
					return "", err
				}
				return r.ID, nil
			},
			changed: func(r *store.Run) bool { return r.RetryOf != "" && r.State == store.RunPendingApprove }},
		{name: "expire", setUp: func(env *engineEnv) string {
			id := created(env)
			env.now = env.now.Add(30 * 24 * time.Hour)
			return id
		}, event: store.EventRunExpired,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				n, err := env.e.Expire(ctx, tx)
				if err == nil && n != 1 {
					err = errors.New("expired no run")
				}
				return id, err
			},
			changed: func(r *store.Run) bool { return r.State == store.RunCancelled && r.StateReason == runs.ReasonExpired }},
		{name: "advance to its end", setUp: done, event: store.EventRunFinished,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				_, err := env.e.AdvanceNodes(ctx, tx, id)
				return id, err
			},
			changed: func(r *store.Run) bool { return r.State == store.RunDone && r.FinishedTS != nil }},
		{name: "advance past its errors", setUp: func(env *engineEnv) string {
			r := env.start("1", "0", "pause")
			env.finishChild(env.children(r.ID)[0].ID, action.Failed)
			return r.ID
		}, event: store.EventRunPaused,
			do: func(ctx context.Context, env *engineEnv, tx store.Tx, id string) (string, error) {
				_, err := env.e.AdvanceNodes(ctx, tx, id)
				return id, err
			},
			changed: func(r *store.Run) bool { return r.State == store.RunPaused }},
	}
}

// TestEveryRunChangeRaisesItsEventInItsTransaction: each verb changes the
// run's row and writes exactly one event of its type about that run, both
// in the caller's transaction: rolled back, neither is stored.
func TestEveryRunChangeRaisesItsEventInItsTransaction(t *testing.T) {
	t.Parallel()
	for _, v := range runVerbs() {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			env := setupEngine(t)
			id := v.setUp(env)
			before, seq := env.runAndSeq(id)

			// Rolled back: no row changed, no event.
			err := env.st.Update(context.Background(), func(tx store.Tx) error {
				if _, err := v.do(context.Background(), env, tx, id); err != nil {
					return err
				}
				return errRollBack
			})
			if !errors.Is(err, errRollBack) {
				t.Fatalf("%s: %v", v.name, err)
			}
			if after, seqAfter := env.runAndSeq(id); !reflect.DeepEqual(after, before) || seqAfter != seq {
				t.Fatalf("%s rolled back stored something: run %+v, events up to %d (was %d)", v.name, after, seqAfter, seq)
			}

			var changedID string
			env.update(func(ctx context.Context, tx store.Tx) error {
				var err error
				changedID, err = v.do(ctx, env, tx, id)
				return err
			})
			after, _ := env.runAndSeq(changedID)
			if reflect.DeepEqual(after, before) || !v.changed(after) {
				t.Fatalf("%s: run row %+v does not show the change", v.name, after)
			}
			n := 0
			for _, e := range env.eventsSince(seq) {
				if e.Type == v.event && e.RunID == changedID {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%s wrote %d %s event(s) about run %s, want 1", v.name, n, v.event, changedID)
			}
		})
	}
}

// runAndSeq reads run id and the sequence number of the last event.
func (env *engineEnv) runAndSeq(id string) (*store.Run, int64) {
	env.t.Helper()
	var r *store.Run
	var seq int64
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if r, err = tx.Run(ctx, id); err != nil {
			return err
		}
		evs := env.eventsIn(ctx, tx, 0)
		if len(evs) > 0 {
			seq = evs[len(evs)-1].Seq
		}
		return nil
	})
	return r, seq
}

func (env *engineEnv) eventsSince(seq int64) []store.Event {
	env.t.Helper()
	var out []store.Event
	env.update(func(ctx context.Context, tx store.Tx) error {
		out = env.eventsIn(ctx, tx, seq)
		return nil
	})
	return out
}

func (env *engineEnv) eventsIn(ctx context.Context, rd store.Reader, seq int64) []store.Event {
	env.t.Helper()
	var out []store.Event
	for {
		evs, err := rd.Events(ctx, seq, 500)
		if err != nil {
			env.t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		seq = evs[len(evs)-1].Seq
	}
}
