package orchestrate

import (
	"context"
	"sync"
	"time"

	"github.com/musterhq/muster/shared/startstop"
)

// Wake-up timers (docs/architecture.md, "Windows, freezes and later
// starts"): an action held until a moment (its not_before, a window that
// opens, a freeze that ends) has its node nudged at that moment, so that it
// goes promptly once it may, not at the next full sync.

// wakeSlack is added to a wake-up so that the clock has passed the moment
// when the nudged sync reads it.
const wakeSlack = 20 * time.Millisecond

// wakeups are the nudges armed for the moments held actions may go: one
// timer per node, the earliest. It is a shared/startstop part: timers may be
// armed before Start (a direct sync's holds) and fire then too; when its
// context ends or at Stop they are stopped, and none is armed after.
type wakeups struct {
	startstop.Base
	nudge func(clusterID, nodeID string)

	mu     sync.Mutex
	timers map[[2]string]wakeup
	closed bool
}

var _ startstop.Service = (*wakeups)(nil)

type wakeup struct {
	at time.Time
	t  *time.Timer
}

func newWakeups(nudge func(clusterID, nodeID string)) *wakeups {
	return &wakeups{nudge: nudge, timers: map[[2]string]wakeup{}}
}

// Start ends the wake-ups when ctx ends. It starts no goroutine.
func (w *wakeups) Start(ctx context.Context) error {
	ctx, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() {
		w.close()
		done()
	})
	return nil
}

// Stop ends every armed wake-up; none is armed after. It is idempotent and
// works on wake-ups never started.
func (w *wakeups) Stop() {
	w.Base.Stop()
	w.close()
}

// at arms a nudge of a node for at, unless one is armed already for at or
// earlier and still to come.
func (w *wakeups) at(clusterID, nodeID string, at time.Time) {
	if at.IsZero() {
		return
	}
	key := [2]string{clusterID, nodeID}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := time.Now()
	if cur, ok := w.timers[key]; ok {
		if !cur.at.After(at) && cur.at.After(now) {
			return
		}
		cur.t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(at.Sub(now)+wakeSlack, func() {
		w.mu.Lock()
		if cur, ok := w.timers[key]; ok && cur.t == t {
			delete(w.timers, key)
		}
		w.mu.Unlock()
		w.nudge(clusterID, nodeID)
	})
	w.timers[key] = wakeup{at: at, t: t}
}

// close stops every armed wake-up and refuses new ones.
func (w *wakeups) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for k, wu := range w.timers {
		wu.t.Stop()
		delete(w.timers, k)
	}
}
