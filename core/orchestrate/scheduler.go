package orchestrate

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/startstop"
)

// The scheduler (docs/architecture.md, "One loop per cluster"): a full sync
// of every cluster every Interval, with jitter, at most Workers at once, and
// soon after a Nudge.

// scheduler asks the clusters' loops for their full syncs, a
// shared/startstop part.
type scheduler struct {
	*startstop.Func
	o *Orchestrator

	mu     sync.Mutex
	nudged map[string]bool // clusters nudged since the scheduler last looked
	wake   chan struct{}
}

var _ startstop.Service = (*scheduler)(nil)

func newScheduler(o *Orchestrator) *scheduler {
	s := &scheduler{o: o, nudged: map[string]bool{}, wake: make(chan struct{}, 1)}
	s.Func = startstop.NewFunc(s.run)
	return s
}

// nudge asks for a full sync of the cluster soon (after Debounce; nudges
// that come while one is pending or running make one more, not one each).
// It never blocks; before Start, nudges wait for it.
func (s *scheduler) nudge(clusterID string) {
	s.mu.Lock()
	s.nudged[clusterID] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// slot is the scheduler's view of one cluster; only the scheduler goroutine
// touches it.
type slot struct {
	due     time.Time
	running bool
	again   bool // nudged while running
}

func (s *scheduler) jitter() time.Duration {
	o := s.o
	d := o.cfg.Interval
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// run asks the loops of due clusters for a full sync while fewer than
// Workers run, and sleeps until the next one is due, a nudge or a full sync
// ends.
func (s *scheduler) run(ctx context.Context) {
	o := s.o
	var syncs sync.WaitGroup
	defer syncs.Wait()
	finished := make(chan string, o.cfg.Workers) // never blocks: at most Workers run
	slots := map[string]*slot{}
	busy := 0
	refresh := func(now time.Time) {
		var ids []string
		err := o.st.Read(ctx, func(r store.Reader) error {
			cs, err := r.Clusters(ctx)
			for _, c := range cs {
				ids = append(ids, c.ID)
			}
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("listing clusters failed", "err", err)
			}
			return
		}
		keep := map[string]bool{}
		for _, id := range ids {
			keep[id] = true
			if _, ok := slots[id]; !ok {
				slots[id] = &slot{due: now} // a new cluster gets a full sync at once
			}
		}
		for id, sl := range slots {
			if !keep[id] && !sl.running {
				delete(slots, id)
			}
		}
	}
	now := time.Now()
	refresh(now)
	nextRefresh := now.Add(o.cfg.Interval)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now = time.Now()
		if !now.Before(nextRefresh) {
			refresh(now)
			nextRefresh = now.Add(o.cfg.Interval)
		}
		for busy < o.cfg.Workers {
			var next string
			for id, sl := range slots {
				if !sl.running && !sl.due.After(now) && (next == "" || sl.due.Before(slots[next].due)) {
					next = id
				}
			}
			if next == "" {
				break
			}
			slots[next].running = true
			busy++
			syncs.Add(1)
			go func(id string) {
				defer syncs.Done()
				rep, ok, err := o.scheduledFullSync(ctx, id)
				if !ok { // another replica holds the cluster's lease
					finished <- id
					return
				}
				switch {
				case errors.Is(err, store.ErrFenced):
					o.metrics.latePushes.Add(float64(rep.Pushed))
					o.log.Info("full sync refused: the lease was lost", "cluster", id, "pushed", rep.Pushed)
				case err != nil && ctx.Err() == nil:
					o.log.Warn("full sync failed", "cluster", id, "err", err)
				case rep.Changes > 0:
					o.log.Debug("full sync", "cluster", id, "nodes", rep.Nodes, "down", rep.Down,
						"pushed", rep.Pushed, "changes", rep.Changes, "events", rep.Events)
				}
				o.TestSignals.FullSynced.Send(FullSynced{Report: rep, Err: err})
				finished <- id
			}(next)
		}
		wait := nextRefresh.Sub(now)
		if busy < o.cfg.Workers {
			for _, sl := range slots {
				if d := sl.due.Sub(now); !sl.running && d < wait {
					wait = d
				}
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
			s.mu.Lock()
			nudged := s.nudged
			s.nudged = map[string]bool{}
			s.mu.Unlock()
			now = time.Now()
			for id := range nudged {
				sl, ok := slots[id]
				if !ok {
					refresh(now)
					if sl, ok = slots[id]; !ok {
						continue // not a cluster (yet)
					}
				}
				if sl.running {
					sl.again = true
				} else if d := now.Add(o.cfg.Debounce); d.Before(sl.due) {
					sl.due = d
				}
			}
		case id := <-finished:
			busy--
			if sl, ok := slots[id]; ok {
				sl.running = false
				if sl.again {
					sl.again, sl.due = false, time.Now().Add(o.cfg.Debounce)
				} else {
					sl.due = time.Now().Add(s.jitter())
				}
			}
		}
	}
}
