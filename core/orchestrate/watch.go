package orchestrate

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/wire"
)

// Watches (docs/architecture.md, "Node syncs and reactive progress").
// Without gossip the core would learn that an action ended only at the next
// sync of its node: a poll of a run's busy nodes (runpoll.go) or the next
// ask of the node's change counter (spread.go). Instead, for every node with
// work in flight on its agent, an action NEW or RUNNING there, run child or
// not, or a run's child not sent yet (from the commit that sent it or found
// it, sent, or as the polls find it), one watcher holds a blocking GET of the
// agent's changes (GET /api/v1/actions?wait=…, as a Consul blocking query)
// and, when it returns an action that ended, nudges a sync of the node. So
// the watches held are at most one per node with work in flight: a node
// whose last action ended is left within watchIdleGrace. The watches are a
// shared/startstop part: none is started before Start, and Stop ends them
// all. A watcher changes nothing itself: it pulls one change at a time with
// its own cursor, never acknowledges, never commits; the cluster's loop
// stays the only path that pulls and commits. Its requests go over their
// own transport, so a held watch never takes a connection a sync needs.

const (
	// runWatchWait is the wait of one blocking GET (the agent cuts it to its
	// own bound, 30 s at most).
	runWatchWait = 20 * time.Second
	// watchIdleGrace: a watcher whose node is found without work in
	// flight is stopped only if no new work comes within this time (a
	// node's next step is created a moment after its last one ended); after
	// an end, the watcher's next GET waits this long, then it checks its
	// node.
	watchIdleGrace = 500 * time.Millisecond
	// watchedPollEvery: a node whose watcher's agent holds its requests
	// (live) is polled by the run polls every this many RunPolls, not every one:
	// the watcher tells of the ends; the poll remains the safety net.
	watchedPollEvery = 4
	// DefaultMaxWatches is Config.MaxWatches' default: the watches held at
	// once, over every cluster. An action created on every node of a
	// 50,000-node cluster would otherwise hold 50,000 goroutines and
	// connections (and TLS handshakes) at once.
	DefaultMaxWatches = 4096
)

// nodeKey names a node of a cluster.
type nodeKey struct{ cluster, node string }

// watches are the orchestrator's watchers, one per watched node.
type watches struct {
	startstop.Base
	o     *Orchestrator
	nudge func(clusterID, nodeID string)
	// hc and guarded reach the agents (guarded: gossip nodes, with
	// RefuseInternalGossip, else nil), on a pool of their own.
	hc, guarded *http.Client

	mu     sync.Mutex
	ctx    context.Context // Start's; nil before it
	m      map[nodeKey]*watcher
	closed bool
	wg     sync.WaitGroup
}

var _ startstop.Service = (*watches)(nil)

// Start lets watchers start, under ctx; they end when it does.
func (ws *watches) Start(ctx context.Context) error {
	ctx, done, err := ws.StartInit(ctx)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	ws.ctx = ctx
	ws.mu.Unlock()
	context.AfterFunc(ctx, func() {
		ws.close()
		done()
	})
	return nil
}

// Stop ends every watcher and waits for them. It is idempotent and works on
// watches never started.
func (ws *watches) Stop() {
	ws.Base.Stop()
	ws.close()
}

// watcher is one node's watch.
type watcher struct {
	cancel context.CancelFunc
	begun  time.Time
	// idle: found without work in flight; it is stopped unless work comes
	// before its grace ends. idleGen tells one grace from the
	// next. Both guarded by watches.mu.
	idle    bool
	idleGen int
	// wanted: a commit or a poll found the node busy since the watcher
	// last checked it; a watcher that finds its node idle keeps watching
	// once more instead of ending (a child sent meanwhile). Guarded by
	// watches.mu.
	wanted bool
	// wantedAt is when a commit or a poll last found the node busy: a poll
	// that read the store before it cannot start the watcher's grace.
	wantedAt time.Time
	// live: the agent held the watcher's last GET, or answered it with a
	// change (an agent of an earlier release answers at once).
	live atomic.Bool
	// own: the node held, when last read, an action in flight outside any
	// run; the run polls, which read only runs' children, leave its
	// watcher to itself.
	own atomic.Bool
}

// watchTransport is the transport of the watches: the agents' transport's
// settings (TLS, timeouts) on a pool of its own, one connection per node.
func watchTransport(base *http.Client) *http.Transport {
	tr := baseTransport(base)
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 1
	tr.MaxConnsPerHost = 1
	return tr
}

// live reports whether the node has a watcher whose agent holds its
// requests.
func (ws *watches) live(k nodeKey) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.m[k]
	return w != nil && w.live.Load()
}

// reconcile makes the watchers of the clusters in busy (cluster →
// node → whether work is in flight on its agent, read at readAt) those
// nodes: it keeps the watchers of busy nodes, starts the missing ones of
// nodes with work on their agents (a run's child not sent yet, held by a
// window or the budget, needs no held connection), and stops those of
// nodes no longer busy, after watchIdleGrace and unless started after
// readAt (work created since) or last found with an action in flight
// outside any run (own: the run polls' busy nodes are runs' alone). Only
// clusters named in scope are stopped (nil: every cluster; empty: none). It
// does nothing before Start or with watches off.
func (ws *watches) reconcile(busy map[string]map[string]bool, scope map[string]bool, readAt time.Time) {
	o := ws.o
	if o.cfg.NoRunWatch {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed || ws.ctx == nil {
		return
	}
	rctx := ws.ctx
	// A busy node keeps its watcher, whatever the scope: a grace under way
	// ends, and a watcher about to end watches on.
	for c, nodes := range busy {
		for n, onAgent := range nodes {
			if w := ws.m[nodeKey{c, n}]; w != nil && onAgent {
				w.idle, w.wanted, w.wantedAt = false, true, time.Now()
			}
		}
	}
	if scope == nil || len(scope) > 0 {
		for k, w := range ws.m {
			if (scope != nil && !scope[k.cluster]) || busy[k.cluster][k.node] || w.idle || w.own.Load() ||
				!w.begun.Before(readAt) || !w.wantedAt.Before(readAt) {
				continue
			}
			w.idle = true
			w.idleGen++
			gen := w.idleGen
			time.AfterFunc(watchIdleGrace, func() {
				ws.mu.Lock()
				defer ws.mu.Unlock()
				if ws.m[k] == w && w.idle && w.idleGen == gen && !w.own.Load() {
					w.cancel()
					delete(ws.m, k)
				}
			})
		}
	}
	for c, nodes := range busy {
		for n, onAgent := range nodes {
			k := nodeKey{c, n}
			if _, ok := ws.m[k]; ok || !onAgent {
				continue
			}
			if len(ws.m) >= o.cfg.MaxWatches {
				continue // synced at every pass and by the run polls instead
			}
			ctx, done, ok := o.leaseContext(rctx, c)
			if !ok {
				continue // another replica holds the cluster
			}
			ctx, cancel := context.WithCancel(ctx)
			w := &watcher{cancel: func() { cancel(); done() }, begun: time.Now()}
			ws.m[k] = w
			ws.wg.Add(1)
			go ws.watchNode(ctx, k, w)
		}
	}
}

// once reports whether watcher w of node k, which found its node
// without work in flight, should look once more: a commit or a
// poll wanted it since it last looked. If not, w leaves the set, so that
// the next commit that sends the node a child starts a new watcher.
func (ws *watches) once(k nodeKey, w *watcher) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.wanted && ws.m[k] == w {
		w.wanted = false
		return true
	}
	if ws.m[k] == w {
		delete(ws.m, k)
	}
	return false
}

// sent starts the watches of the nodes to which the committed answers of
// nodes (with their plan w, nil when nothing was written) sent an action, or
// on which they saw one in flight: from then on its end is told by its
// node's watcher. A node whose action ended meanwhile has its watcher read
// it idle at once, and end.
func (ws *watches) sent(clusterID string, nodes []nodeResult, w *writePlan) {
	if ws.o.cfg.NoRunWatch {
		return
	}
	// busy: the nodes to watch; own: those with an action in flight
	// outside any run.
	var busy, own map[string]bool
	add := func(r *store.Record) {
		if busy == nil {
			busy, own = map[string]bool{}, map[string]bool{}
		}
		busy[r.NodeID] = true
		own[r.NodeID] = own[r.NodeID] || r.RunID == ""
	}
	if w != nil {
		for i := range w.records {
			if r := &w.records[i].Rec; onAgent(r.State) {
				add(r)
			}
		}
	}
	for i := range nodes {
		res := &nodes[i]
		if res.status != store.NodeUp {
			continue
		}
		for j := range res.open {
			if onAgent(res.open[j].State) {
				add(&res.open[j])
			}
		}
	}
	if busy == nil {
		return
	}
	ws.reconcile(map[string]map[string]bool{clusterID: busy}, map[string]bool{}, time.Now())
	// From the start, the run polls leave the watch of an action outside
	// any run alone (own), before its watcher has read its node.
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for n := range own {
		if wt := ws.m[nodeKey{clusterID, n}]; wt != nil && own[n] {
			wt.own.Store(true)
			wt.idle = false
		}
	}
}

// inFlight reads a node's open actions: busy when an action is in flight
// on its agent or a run's child is not finished (its watch goes on through
// the run's waves), own when an action in flight there is outside any run.
func inFlight(open []store.Record) (busy, own bool) {
	for i := range open {
		r := &open[i]
		switch {
		case r.RunID == "" && onAgent(r.State):
			return true, true
		case r.RunID != "" && unfinishedChild(r.State):
			busy = true
		}
	}
	return busy, false
}

// close ends every watcher, refuses new ones and waits for them.
func (ws *watches) close() {
	ws.mu.Lock()
	ws.closed = true
	for k, w := range ws.m {
		w.cancel()
		delete(ws.m, k)
	}
	ws.mu.Unlock()
	ws.wg.Wait()
	ws.hc.CloseIdleConnections()
	if ws.guarded != nil {
		ws.guarded.CloseIdleConnections()
	}
}

// drop forgets w, ending its node's watch, if it is still the node's.
func (ws *watches) drop(k nodeKey, w *watcher) {
	ws.mu.Lock()
	if ws.m[k] == w {
		delete(ws.m, k)
	}
	ws.mu.Unlock()
	w.cancel()
}

// client is the HTTP client of a watch of node n, and whether it is
// the watch's own (to close when the watch ends): with AgentTLS, one that
// accepts only n's certificate, as the loop's.
func (ws *watches) client(n *store.Node) (*http.Client, bool) {
	o := ws.o
	if o.cfg.AgentTLS == nil {
		if o.guardedNode(n) {
			return ws.guarded, false
		}
		return ws.hc, false
	}
	return o.peerClient(watchTransport(ws.hc), n), true
}

// watchNode is one node's watcher: blocking GETs of one change after its
// cursor (from the node's stored cursor), a nudge of the node for every
// change that ends an action. It ends when ctx does (Stop, the lease lost,
// reconcile), or once the node no longer holds work in flight
// (inFlight), which it checks after every wait that ended without a change
// (watchIdleGrace after an end, so that the watch of a run's last child
// ends with it) and every failure. An agent that answers an empty page long before
// the wait ended (one of an earlier release, which ignores wait) is asked
// again only after RunPoll, and then after twice as long each time, up to
// runWatchWait, as is one that fails.
func (ws *watches) watchNode(ctx context.Context, k nodeKey, w *watcher) {
	o := ws.o
	defer ws.wg.Done()
	defer ws.drop(k, w)
	var (
		ag      *client.Agent
		hc      *http.Client
		own     bool
		addr    string
		storeID string
		cursor  int64
	)
	defer func() {
		if own {
			hc.CloseIdleConnections()
		}
	}()
	backoff := o.cfg.RunPoll
	pause := func() bool {
		o.TestSignals.WatchPaused.Send(WatchPause{Cluster: k.cluster, Node: k.node, For: backoff})
		t := time.NewTimer(backoff)
		backoff = max(backoff, min(2*backoff, runWatchWait))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	fresh := true // read the node (and whether it is busy) before the next GET
	wait := runWatchWait
	var source string
	for ctx.Err() == nil {
		if fresh {
			n, busy, standalone, err := ws.watchedNode(ctx, k)
			if err != nil {
				return
			}
			w.own.Store(standalone)
			if standalone {
				ws.mu.Lock()
				w.idle = false // a grace a run poll started ends
				ws.mu.Unlock()
			}
			if !busy {
				if ws.once(k, w) {
					continue // a child was sent meanwhile: read the node again
				}
				return
			}
			if ag == nil || n.Addr != addr || n.StoreID != storeID || n.Source != source {
				if own {
					hc.CloseIdleConnections()
				}
				hc, own = ws.client(n)
				ag, addr, source = client.NewAgent(o.agentURL(n.Addr), hc), n.Addr, n.Source
				if n.StoreID != storeID {
					storeID, cursor = n.StoreID, n.Cursor
				}
			}
			fresh = false
		}
		begin := time.Now()
		page, err := call(ctx, wait+o.cfg.AgentTimeout, func(ctx context.Context) (*wire.ChangesPage, error) {
			return ag.WaitChanges(ctx, cursor, 1, wait)
		})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.live.Store(false)
			fresh = true
			if !pause() {
				return
			}
		case len(page.Actions) > 0:
			w.live.Store(true)
			backoff = o.cfg.RunPoll
			cursor = page.NextCursor
			wait = runWatchWait
			if page.Actions[0].State.Final() {
				ws.nudge(k.cluster, k.node)
				// The node's next child, if any, comes within the
				// grace; else the watch checks its node and ends.
				wait = watchIdleGrace
			}
		case page.WaitMS == 0 || time.Since(begin) < time.Duration(page.WaitMS)*time.Millisecond/2:
			// Answered with nothing and no wait applied: an agent of an
			// earlier release, which ignores wait; or answered early: one
			// shutting down. The run polls poll it at every RunPoll.
			w.live.Store(false)
			fresh = true
			if !pause() {
				return
			}
		default:
			w.live.Store(true)
			backoff = o.cfg.RunPoll
			fresh, wait = true, runWatchWait
		}
	}
}

// watchedNode reads node k and whether work is still in flight there
// (inFlight): busy, and own when outside any run. The run's state is not
// read (a run's record is large): the run polls stop the watches of runs
// that are not running (reconcile).
func (ws *watches) watchedNode(ctx context.Context, k nodeKey) (n *store.Node, busy, own bool, err error) {
	o := ws.o
	err = o.st.Read(ctx, func(r store.Reader) error {
		var err error
		if n, err = r.Node(ctx, k.cluster, k.node); err != nil {
			return err
		}
		open, err := r.OpenActions(ctx, k.cluster, k.node)
		if err != nil {
			return err
		}
		busy, own = inFlight(open)
		return nil
	})
	return n, busy, own, err
}
