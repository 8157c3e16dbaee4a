package notify

import (
	"sync"

	"github.com/musterhq/muster/core/store"
)

// recentSpan is how many events, counted back from the newest read, the
// worker keeps in memory with their bodies.
const recentSpan = 4 * batchSize

// recent holds the events the destinations' loops read lately, and their
// bodies by format: an event that goes to several destinations is read
// from the store and rendered once, not once per destination
// (docs/notifications.md, "Cost"). Events never change once stored.
type recent struct {
	mu     sync.Mutex
	events map[int64]*store.Event
	bodies map[bodyKey][]byte
	// newest is the newest event kept; pruned, the newest when last
	// pruned.
	newest, pruned int64
}

type bodyKey struct {
	seq    int64
	format string
}

func newRecent() *recent {
	return &recent{events: map[int64]*store.Event{}, bodies: map[bodyKey][]byte{}}
}

// fill sets, in events, each seq it keeps, and returns the deliveries of
// batch whose events it does not keep.
func (c *recent) fill(batch []store.Delivery, events map[int64]*store.Event) []store.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []store.Delivery
	for _, d := range batch {
		if e, ok := c.events[d.EventSeq]; ok {
			events[d.EventSeq] = e
		} else {
			missing = append(missing, d)
		}
	}
	return missing
}

// add keeps the events read (nil: no longer stored, not kept), and drops
// those recentSpan or more behind the newest.
func (c *recent) add(events map[int64]*store.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range events {
		if e != nil {
			c.newest = max(c.newest, e.Seq)
		}
	}
	for seq, e := range events {
		// A destination catching up on old events reads them past
		// the span: they are not kept, and the cache stays bounded.
		if e != nil && seq > c.newest-recentSpan {
			c.events[seq] = e
		}
	}
	if c.newest-c.pruned < recentSpan/4 && len(c.events) <= recentSpan {
		return
	}
	c.pruned = c.newest
	for seq := range c.events {
		if seq <= c.newest-recentSpan {
			delete(c.events, seq)
		}
	}
	for k := range c.bodies {
		if k.seq <= c.newest-recentSpan {
			delete(c.bodies, k)
		}
	}
}

// body returns e's body in format, rendered once while e is kept.
func (c *recent) body(format, publicURL string, e *store.Event) ([]byte, error) {
	k := bodyKey{e.Seq, format}
	c.mu.Lock()
	b, ok := c.bodies[k]
	_, kept := c.events[e.Seq]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := Body(format, publicURL, e)
	if err != nil || !kept {
		return b, err
	}
	c.mu.Lock()
	c.bodies[k] = b
	c.mu.Unlock()
	return b, nil
}
