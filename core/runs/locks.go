package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Locks across runs (docs/architecture.md, "Runs and playbooks"): a run
// may take a lock for its whole life, a stage for the time it runs. The
// advance that would start the run's first children, or the stage, takes
// the lock in the same write transaction (store.Tx.TakeRunLock); when
// another run holds it, the run, or the stage, waits: it creates nothing,
// and its state_reason says "waiting for lock NAME held by run X". The
// lock is released in the transaction that ends the stage, or the run in
// any final state (runChange.save), so the waiter takes it at its next
// advance. A holder that is gone or final (a run ended before locks were
// released with it) loses the lock to the next taker.

// KindLocks says which lock actions of a kind take (nil: none):
// budget.Policy.KindLock, read from the core's kinds: configuration as it
// is when a run is planned.
type KindLocks func(kind string) *store.Lock

// lockKinds gives each stage the locks the kinds of its steps (rollback
// included) declare, other than its own (store.RunStage.KindLocks), in
// the order its steps first name them. With a lock of its own for the
// whole run (runLock), a stage takes no other (Check says why): a kind
// declaring another is refused.
func lockKinds(stages []store.RunStage, runLock *store.Lock, locks KindLocks) error {
	if locks == nil {
		return nil
	}
	for i := range stages {
		st := &stages[i]
		st.KindLocks = nil
		for _, sp := range append(slices.Clone(st.Procedure()), st.Rollback...) {
			l := locks(sp.Kind)
			if l == nil || (st.Lock != nil && *l == *st.Lock) || (runLock != nil && *l == *runLock) {
				continue
			}
			if runLock != nil {
				return invalid("stage %s: kind %s takes lock %s (the core's kinds: configuration), but the run holds lock %s from start to end, so a stage may take no other (two runs taking them in the opposite order would wait for each other for ever): give the run lock %s, or none",
					st.Name, sp.Kind, l.Name, runLock.Name, l.Name)
			}
			j := slices.IndexFunc(st.KindLocks, func(k store.KindLock) bool { return k.Lock == *l })
			if j < 0 {
				st.KindLocks = append(st.KindLocks, store.KindLock{Lock: *l})
				j = len(st.KindLocks) - 1
			}
			if !slices.Contains(st.KindLocks[j].Kinds, sp.Kind) {
				st.KindLocks[j].Kinds = append(st.KindLocks[j].Kinds, sp.Kind)
			}
		}
	}
	return nil
}

// lockSep begins, in a running run's state_reason, the locks it waits for:
// "approved; waiting for lock db held by run 1f2e…".
const lockSep = "; waiting for lock "

// lockWaits is what a run waits for after takeLocks: held is false when
// its own lock is another's; text names every lock it waits for ("db held
// by run X, lb held by run Y").
type lockWaits struct {
	held bool
	text []string
}

// takeLock takes lock l of run r (for stage, "" for the run itself) in tx
// at t and returns the run holding it: r's id when r holds it now.
func takeLock(ctx context.Context, tx store.Tx, r *store.Run, l *store.Lock, stage string, t time.Time) (string, error) {
	key := l.Key(r.ClusterID)
	for range 2 {
		h, err := tx.TakeRunLock(ctx, key, r.ID, stage, t)
		if err != nil || h.RunID == r.ID {
			return h.RunID, err
		}
		other, err := tx.Run(ctx, h.RunID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return "", err
		case !store.RunFinal(other.State):
			return h.RunID, nil
		}
		// Its holder is gone or ended: the lock is free.
		if _, err := tx.ReleaseRunLock(ctx, key, h.RunID); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("run %s: lock %s: taken again while freed", r.ID, key)
}

// heldBy returns the run other than r that holds lock l, "" when none
// does (a holder gone or final holds nothing: takeLock frees it). It only
// reads.
func heldBy(ctx context.Context, tx store.Tx, r *store.Run, l *store.Lock) (string, error) {
	h, err := tx.RunLock(ctx, l.Key(r.ClusterID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case h.RunID == r.ID:
		return "", nil
	}
	other, err := tx.Run(ctx, h.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case store.RunFinal(other.State):
		return "", nil
	}
	return h.RunID, nil
}

// lockText names lock l held by run holder, as a waiter says it.
func lockText(l *store.Lock, holder string) string {
	s := l.Name
	if l.Scope == store.LockGlobal {
		s += " (global)"
	}
	return s + " held by run " + holder
}

// takeLocks takes, in tx at t, the locks run r needs for step: its own
// lock while it runs, and the lock of each stage that step starts. A stage
// whose lock another run holds stays PENDING: step is changed so that it
// neither starts nor creates children, nor decides anything of its nodes.
func takeLocks(ctx context.Context, tx store.Tx, r *store.Run, step *Step, t time.Time) (lockWaits, error) {
	w := lockWaits{held: true}
	if r.State != store.RunRunning {
		return w, nil
	}
	if r.Lock != nil {
		h, err := takeLock(ctx, tx, r, r.Lock, "", t)
		if err != nil {
			return w, err
		}
		if h != r.ID {
			w.held = false
			w.text = append(w.text, lockText(r.Lock, h))
			return w, nil
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.State != store.StagePending || i >= len(step.Stages) || step.Stages[i] != store.StageRunning {
			continue
		}
		// Every lock of the stage, or none: a stage holding some while it
		// waits for others could wait on a run doing the reverse. Who holds
		// them is read first, so that a waiting stage's pass writes
		// nothing; the locks are taken only when all look free (or this
		// run's), and given back should one be taken meanwhile.
		var taken []store.Lock
		waiting := false
		for _, l := range st.Locks() {
			h, err := heldBy(ctx, tx, r, &l)
			if err != nil {
				return w, err
			}
			if h != "" {
				w.text = append(w.text, lockText(&l, h))
				waiting = true
			}
		}
		for _, l := range st.Locks() {
			if waiting {
				break
			}
			h, err := takeLock(ctx, tx, r, &l, st.Name, t)
			if err != nil {
				return w, err
			}
			if h == r.ID {
				taken = append(taken, l)
				continue
			}
			w.text = append(w.text, lockText(&l, h))
			waiting = true
		}
		if !waiting {
			continue
		}
		step.Stages[i] = st.State
		for _, l := range taken {
			if keepsLock(r, step, i, l.Key(r.ClusterID)) {
				continue
			}
			if _, err := tx.ReleaseRunLock(ctx, l.Key(r.ClusterID), r.ID); err != nil {
				return w, err
			}
		}
		step.Create = slices.DeleteFunc(step.Create, func(n New) bool { return n.Stage == st.Name })
		if i < len(step.Failed) {
			step.Failed[i] = st.Failed
		}
		if i < len(step.Skipped) {
			step.Skipped[i] = st.Skipped
		}
		if i < len(step.Nodes) {
			step.Nodes[i] = nodeCounts(st)
		}
		if i < len(step.Why) {
			step.Why[i] = nil
		}
		delete(step.Unreachable, i)
	}
	return w, nil
}

// keepsLock reports whether run r keeps lock key when its stage i no
// longer needs it: r itself holds it, or another of its stages running
// after step does.
func keepsLock(r *store.Run, step *Step, i int, key string) bool {
	if r.Lock != nil && r.Lock.Key(r.ClusterID) == key {
		return true
	}
	for j := range r.Stages {
		if j == i || j >= len(step.Stages) || step.Stages[j] != store.StageRunning {
			continue
		}
		for _, l := range r.Stages[j].Locks() {
			if l.Key(r.ClusterID) == key {
				return true
			}
		}
	}
	return false
}

// releaseStageLocks releases, in tx, the locks of each stage of r that
// ends now (its state in step is final), unless r itself, or another of
// its stages still running, holds the same lock.
func releaseStageLocks(ctx context.Context, tx store.Tx, r *store.Run, step *Step) error {
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.State != store.StageRunning || i >= len(step.Stages) || step.Stages[i] == store.StageRunning ||
			step.Stages[i] == store.StagePending {
			continue
		}
		for _, l := range st.Locks() {
			key := l.Key(r.ClusterID)
			if keepsLock(r, step, i, key) {
				continue
			}
			if _, err := tx.ReleaseRunLock(ctx, key, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// baseReason is a running run's state_reason without what it waits for.
func baseReason(reason string) string {
	for _, sep := range []string{lockSep, waitingSep} {
		reason, _, _ = strings.Cut(reason, sep)
	}
	return reason
}

// withLocks is reason with the locks it waits for (none: dropped) before
// its waiting part (WithWaiting).
func withLocks(reason string, locks []string) string {
	base := baseReason(reason)
	_, waiting, _ := strings.Cut(reason, waitingSep)
	if len(locks) > 0 {
		base += lockSep + strings.Join(locks, ", ")
	}
	if waiting != "" {
		base += waitingSep + waiting
	}
	return base
}

// takesLocks reports whether run r, or a stage of it, takes a lock.
func takesLocks(r *store.Run) bool {
	return r.Lock != nil || slices.ContainsFunc(r.Stages, func(st store.RunStage) bool { return len(st.Locks()) > 0 })
}
