package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
)

// ReasonRemoved is the last error of a delivery made dead because its
// destination is no longer configured.
const ReasonRemoved = "the destination is no longer configured"

// retirePage bounds the deliveries made dead in one transaction.
const retirePage = 500

// retirer makes dead the pending deliveries of destinations this worker
// saw removed by a reload (docs/notifications.md, "Reloading"): after each
// reload that removed a destination, and once more a poll later (an event
// whose transaction began before the reload may still have been enqueued
// for the removed destination). Such deliveries are never sent: no loop
// runs for their destination. A destination merely not configured here is
// left alone: during a rolling reload of several replicas, it may be one
// the others have just added.
func (w *Worker) retirer(ctx context.Context) {
	var later <-chan time.Time
	pass := func() {
		later = nil
		if err := w.retire(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("dropping the deliveries of removed destinations failed, will try again", "err", err)
			later = time.After(w.cfg.Poll)
		}
	}
	pass()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.retireWake:
			pass()
			if later == nil {
				later = time.After(w.cfg.Poll)
			}
		case <-later:
			pass()
		}
	}
}

// retire makes dead the pending deliveries of every destination that has
// some, was removed by a reload here and is not configured again.
func (w *Worker) retire(ctx context.Context) error {
	w.mu.Lock()
	var removed []string
	for name := range w.removed {
		removed = append(removed, name)
	}
	w.mu.Unlock()
	if len(removed) == 0 {
		return nil
	}
	var stats []store.DeliveryStat
	if err := w.st.Read(ctx, func(r store.Reader) error {
		var err error
		stats, err = r.DeliveryStats(ctx, removed...)
		return err
	}); err != nil {
		return err
	}
	for _, s := range stats {
		if s.Backlog == 0 {
			continue
		}
		w.mu.Lock()
		removed := w.removed[s.Destination]
		w.mu.Unlock()
		if !removed {
			continue
		}
		if _, _, _, ok := w.dest(s.Destination); ok {
			continue
		}
		if err := w.drop(ctx, s.Destination); err != nil {
			return err
		}
	}
	return nil
}

// drop makes dead every pending delivery of a destination that is no
// longer configured, a page per transaction, and appends one notify.dead
// event saying how many.
func (w *Worker) drop(ctx context.Context, name string) error {
	// Its loop, stopped by the reload, records the tries it made first.
	w.mu.Lock()
	ended := w.ended[name]
	w.mu.Unlock()
	if ended != nil {
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	total := 0
	for {
		if _, _, _, ok := w.dest(name); ok {
			return nil // configured again meanwhile
		}
		n := 0
		err := w.st.Update(ctx, func(tx store.Tx) error {
			ds, err := tx.PendingDeliveries(ctx, name, retirePage)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			for i := range ds {
				d := &ds[i]
				d.State, d.LastError, d.UpdatedTS = store.DeliveryDead, ReasonRemoved, now
				if err := tx.UpdateDelivery(ctx, d); err != nil {
					return err
				}
			}
			n = len(ds)
			// The cursor moves past what was made dead (a page is
			// the head of the queue), and once nothing is left, to
			// the newest event: later reads of the queue and the
			// stats do not walk what it will never send.
			through := int64(0)
			if n > 0 {
				through = ds[n-1].EventSeq
			}
			if n < retirePage {
				if through, err = tx.LatestSeq(ctx); err != nil {
					return err
				}
			}
			if err := tx.SkipTo(ctx, name, through); err != nil {
				return err
			}
			if n == retirePage || total+n == 0 {
				return nil
			}
			return tx.AppendEvent(ctx, &store.Event{Type: store.EventNotifyDead, Actor: store.ActorCore,
				Message: fmt.Sprintf("dropped %d pending deliveries to %s: %s", total+n, name, ReasonRemoved),
				Data:    map[string]any{"destination": name, "dropped": total + n, "reason": ReasonRemoved}})
		})
		if err != nil {
			return err
		}
		total += n
		if n < retirePage {
			if total > 0 {
				w.log.Warn("pending deliveries dropped", "destination", name, "deliveries", total, "reason", ReasonRemoved)
			}
			return nil
		}
	}
}
