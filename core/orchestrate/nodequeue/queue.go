// Package nodequeue is the queue of the nodes of one cluster that want a
// sync, in the spirit of client-go's workqueue (docs/architecture.md, "One
// loop per cluster"):
//
//   - requests for one node merge: a node asked for ten times before its
//     sync starts is synced once;
//   - never two syncs of one node at once: a node is handed out only while
//     no sync of it runs, whoever started that sync (Start marks a sync that
//     was not asked for through the queue, such as a node of a full sync's
//     batch);
//   - a node asked for while its sync runs is synced again after it: Done
//     makes it ready again.
//
// A Queue is safe for concurrent use. It starts no goroutine.
package nodequeue

import (
	"slices"
	"sync"
)

// Queue is a set of nodes that want a sync and of nodes whose sync runs.
// The zero value is not usable: build one with New.
type Queue struct {
	mu   sync.Mutex
	cond *sync.Cond
	// ready lists the wanted nodes whose sync does not run, in the order
	// they were first asked for.
	ready []string
	// wanted: asked for, and not handed out since (ready, or waiting for
	// the sync that runs).
	wanted map[string]bool
	// running: a sync of the node runs (handed out, or Start).
	running  map[string]bool
	shutDown bool
}

// New returns an empty queue.
func New() *Queue {
	q := &Queue{wanted: map[string]bool{}, running: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add asks for a sync of node. It merges into a request not handed out
// yet; while the node's sync runs, the node is ready again once that sync
// is Done. It never blocks, and does nothing after ShutDown.
func (q *Queue) Add(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown || q.wanted[node] {
		return
	}
	q.wanted[node] = true
	if !q.running[node] {
		q.ready = append(q.ready, node)
		q.cond.Signal()
	}
}

// Get waits for a ready node, marks its sync running and returns it. It
// returns false once the queue is shut down.
func (q *Queue) Get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 && !q.shutDown {
		q.cond.Wait()
	}
	if q.shutDown {
		return "", false
	}
	n := q.ready[0]
	q.ready = q.ready[1:]
	q.hand(n)
	return n, true
}

// TakeReady marks the sync of every ready node running and returns them,
// in the order they were asked for (nil when none is ready). It never
// blocks.
func (q *Queue) TakeReady() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown || len(q.ready) == 0 {
		return nil
	}
	out := q.ready
	q.ready = nil
	for _, n := range out {
		q.hand(n)
	}
	return out
}

// hand marks n handed out. q.mu is held.
func (q *Queue) hand(n string) {
	delete(q.wanted, n)
	q.running[n] = true
}

// Start marks a sync of node running that was not asked for through the
// queue; it returns false, and marks nothing, when one runs already. A
// request of the node waits for Done.
func (q *Queue) Start(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running[node] {
		return false
	}
	q.running[node] = true
	if q.wanted[node] {
		for i, n := range q.ready {
			if n == node {
				q.ready = append(q.ready[:i:i], q.ready[i+1:]...)
				break
			}
		}
	}
	return true
}

// Done ends the sync of node: a node asked for meanwhile is ready again.
// It does nothing for a node whose sync does not run.
func (q *Queue) Done(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.running[node] {
		return
	}
	delete(q.running, node)
	if q.wanted[node] && !q.shutDown {
		q.ready = append(q.ready, node)
		q.cond.Signal()
	}
}

// Running reports whether a sync of node runs.
func (q *Queue) Running(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running[node]
}

// Waiting lists, sorted, the nodes asked for whose sync runs: each is ready
// once its sync is Done.
func (q *Queue) Waiting() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for n := range q.wanted {
		if q.running[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Len is the number of nodes asked for and not handed out yet.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.wanted)
}

// ShutDown drops every request, refuses those to come, and wakes every Get,
// which returns false. Start and Done still keep count of the syncs that
// run.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutDown = true
	q.ready = nil
	clear(q.wanted)
	q.cond.Broadcast()
}
