// Package orchestrate is the only part of the core that talks to agents.
// Each cluster has one loop (loop.go, docs/architecture.md, "One loop per
// cluster") and one pipeline, "sync a set of nodes": pull the nodes' changed
// actions, reconcile them with the core's records (the agent wins every
// conflict), push PENDING_SCHEDULE actions and pending cancels, and commit
// it under the lease's fencing epoch, or nothing when nothing changed.
//
// The Orchestrator asks each cluster's loop for a full sync every Interval
// (with jitter), at most Workers clusters at once, and early when a cluster
// is nudged; a nudge of a node asks for a sync of that node. It also expires
// approvals.
package orchestrate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testsignal"
	"github.com/musterhq/muster/shared/tlsutil"
)

// Config tunes the orchestrator. Zero fields take the DefaultConfig values.
type Config struct {
	// Interval between two passes of one cluster; each wait is jittered ±10%.
	Interval time.Duration
	// Workers bounds the passes running at once, over all clusters.
	Workers int
	// MaxQueuedPerNode bounds the NEW and RUNNING actions of one agent.
	MaxQueuedPerNode int
	// FullSyncEvery: every this many passes, a cluster's passes list every
	// record of every agent and compare id sets (LOST detection).
	FullSyncEvery int
	// AgentTimeout bounds every request to an agent.
	AgentTimeout time.Duration
	// ScheduleTTL: a PENDING_SCHEDULE action that never reached its agent
	// this long after it was scheduled is CANCELLED with reason "schedule
	// timeout". Zero disables it.
	ScheduleTTL time.Duration
	// Rules, when set, makes every action change (the core shares one with
	// the API, so approval expiry is one rule, under the approval policy as
	// it is at each sweep: Rules.Policy); nil builds one with ScheduleTTL
	// and an approval policy without a TTL (nothing expires).
	Rules *actions.Rules
	// SweepEvery is the period of the expiry sweep (default Interval).
	SweepEvery time.Duration
	// NodeConcurrency bounds the nodes of one full sync's batch talked to
	// at once.
	NodeConcurrency int
	// BatchSize is the number of nodes of one batch of a full sync: nudged
	// nodes are served between batches (and beside a batch a slow agent
	// holds up).
	BatchSize int
	// ContactEvery: a node's last contact (its last successful sync) is
	// kept in memory and stored with the node at most this often, unless
	// something else of the node is written (so that an idle sync writes
	// nothing).
	ContactEvery time.Duration
	// PageSize is the limit of one GET actions page.
	PageSize int
	// Debounce delays a nudged pass so that a burst of nudges makes one pass.
	Debounce time.Duration
	// RunPoll is how often the nodes holding an unfinished child of a
	// running run are synced (those nodes alone), so that a run's next wave
	// does not wait for the interval when no gossip note tells of the end.
	RunPoll time.Duration
	// NoRunWatch turns the run watches off (watch.go): the ends of a run's
	// children are then seen at the polls of RunPoll alone, without gossip.
	NoRunWatch bool
	// HTTPClient reaches the agents (with the agents' TLS settings). Nil
	// uses a plain client that keeps one idle connection to every node
	// between passes and opens at most two to a node (the standard
	// library's default keeps 100 in all, so a larger fleet would reconnect
	// to most nodes on every pass); requests carry their own timeouts.
	HTTPClient *http.Client
	// Scheme is put before agent addresses that have none: "http" (default)
	// or "https". With AgentTLS it is always "https".
	Scheme string
	// Leases, when set, decides which clusters this replica passes (several core
	// replicas on one database, docs/architecture.md, "Several core replicas");
	// nil: all of them.
	Leases Leases
	// AgentTLS, when set, is the TLS client configuration agents are reached
	// with (their CA, the core's certificate). Every node is then reached
	// over https, whatever scheme its address names, on its own
	// connections, which accept only a certificate of that CA naming the
	// node (tlsutil.ForPeer): a machine answering at a node's address with
	// another node's certificate, or without TLS, is refused before
	// anything is sent to it.
	AgentTLS *tls.Config
	// StaticLabels are the labels the core's configuration gives nodes, by
	// cluster and node id; a pass lays the agent's own labels (from its
	// info) over them, key by key.
	StaticLabels map[string]map[string]map[string]string
	// Budget is the disruption budget of every cluster and the kinds it counts
	// (docs/architecture.md, "Labels, targets and the disruption budget"): no
	// disruptive action is pushed past it.
	Budget *live.Value[budget.Policy]
	// Calendars are the clusters' maintenance windows and freezes
	// (docs/architecture.md, "Windows, freezes and later starts"): no
	// disruptive action is pushed outside a window or in a freeze. nil:
	// none.
	Calendars *live.Value[schedule.Calendars]
	// Runs, when set, moves runs on at every pass (core/runs).
	Runs Runs
	// RefuseInternalGossip: nodes found through gossip are never dialled at
	// a loopback, link-local or unspecified IP address, whatever their host
	// name resolves to (the core is off loopback and gossip.insecure is not
	// set; docs/security.md). Static nodes are not concerned.
	RefuseInternalGossip bool
}

// DefaultConfig returns the defaults (docs/architecture.md, "Configuration").
func DefaultConfig() Config {
	return Config{
		Interval:         10 * time.Second,
		Workers:          8,
		MaxQueuedPerNode: 16,
		FullSyncEvery:    6,
		AgentTimeout:     5 * time.Second,
		ScheduleTTL:      24 * time.Hour,
		NodeConcurrency:  16,
		BatchSize:        256,
		ContactEvery:     time.Minute,
		PageSize:         500,
		Debounce:         50 * time.Millisecond,
		RunPoll:          250 * time.Millisecond,
		Scheme:           "http",
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Interval <= 0 {
		c.Interval = d.Interval
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.MaxQueuedPerNode <= 0 {
		c.MaxQueuedPerNode = d.MaxQueuedPerNode
	}
	if c.FullSyncEvery <= 0 {
		c.FullSyncEvery = d.FullSyncEvery
	}
	if c.AgentTimeout <= 0 {
		c.AgentTimeout = d.AgentTimeout
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = c.Interval
	}
	if c.NodeConcurrency <= 0 {
		c.NodeConcurrency = d.NodeConcurrency
	}
	if c.BatchSize <= 0 {
		c.BatchSize = d.BatchSize
	}
	if c.ContactEvery <= 0 {
		c.ContactEvery = d.ContactEvery
	}
	if c.PageSize <= 0 {
		c.PageSize = d.PageSize
	}
	if c.Debounce <= 0 {
		c.Debounce = d.Debounce
	}
	if c.RunPoll <= 0 {
		c.RunPoll = d.RunPoll
	}
	if c.Scheme == "" {
		c.Scheme = d.Scheme
	}
	if c.AgentTLS != nil {
		c.Scheme = "https"
	}
}

// Leases tells whether this replica holds a cluster's lease (core/lease).
type Leases interface {
	// PassContext returns the context of one pass of the cluster, which
	// carries the lease's store.Fence and ends when the lease is lost, or ok
	// false when this replica does not hold the lease.
	PassContext(ctx context.Context, clusterID string) (pctx context.Context, done context.CancelFunc, ok bool)
}

// Errors of Start (shared/startstop's).
var (
	ErrStarted = startstop.ErrStarted
	ErrStopped = startstop.ErrStopped
)

// Orchestrator runs the clusters' loops. Build it with New, run it with
// Start, end it with Stop. Pass, SyncNodes and ExpireApprovals may also be
// called directly.
type Orchestrator struct {
	cfg     Config
	st      store.Store
	rules   *actions.Rules
	log     *slog.Logger
	hc      *http.Client
	guarded *http.Client // hc's twin for gossip nodes, with RefuseInternalGossip (else nil)
	// whc and wguarded are hc and guarded for the run watches (watch.go),
	// on a pool of their own.
	whc, wguarded *http.Client
	watch         watchSet
	ownHC         bool // hc was made here: Stop closes its idle connections
	metrics       *metrics

	startstop.Base
	mu       sync.Mutex
	clusters map[string]*clusterState
	gone     map[string]bool // clusters the store lacks: dropped when their loop parks
	nudged   map[string]bool
	wake     chan struct{}
	started  bool            // Start ran: nudges are served
	closed   bool            // Stop ran: no loop starts
	runCtxV  context.Context // Start's context
	loops    sync.WaitGroup  // the clusters' loops
	// stopCtx ends at Stop: the loops' context before Start, and a bound on
	// direct calls.
	stopCtx  context.Context
	stopLoop context.CancelFunc
	// wakeups nudge the nodes of held actions when they may go (gate.go).
	wakeups wakeups

	// TestSignals lets a test wait for the orchestrator to reach a point;
	// they do nothing unless a test calls Init.
	TestSignals TestSignals
}

// TestSignals are the points a test can wait for.
type TestSignals struct {
	// Passed carries every pass the scheduler ran, once it returned.
	Passed testsignal.Signal[Passed]
	// Swept carries what each sweep expired.
	Swept testsignal.Signal[Swept]
	// NodesSynced carries every sync of nudged nodes (NudgeNode) the
	// orchestrator ran, once it returned (Err errNotLeased: refused for
	// want of the cluster's lease).
	NodesSynced testsignal.Signal[NodesSynced]
	// Steps carries the beginning and the end of every step of every
	// cluster's pipeline: each talk to a node, each commit. Init leaves it
	// alone (a test of it calls InitSteps): they are many.
	Steps testsignal.Signal[Step]
	// WatchPaused carries every pause of a run watcher before it asks its
	// agent again (an error, or an answer with nothing before its wait).
	WatchPaused testsignal.Signal[WatchPause]
}

// WatchPause is a run watcher pausing: its node and how long it waits.
type WatchPause struct {
	Cluster, Node string
	For           time.Duration
}

// Step is the beginning or the end of one step of a cluster's pipeline.
type Step struct {
	Cluster string
	Kind    string // StepTalk, StepCommit or StepDrop
	Begin   bool
	Nodes   []string // the node talked to, or those whose answers are committed or dropped
}

// The kinds of Step.
const (
	StepTalk   = "talk"
	StepCommit = "commit"
	// StepDrop: answers dropped unwritten (their sync was cut short); it
	// has no end.
	StepDrop = "drop"
)

// InitSteps readies the Steps signal for the test tb.
func (ts *TestSignals) InitSteps(tb testsignal.TB) { ts.Steps.Init(tb) }

// NodesSynced is one sync of nudged nodes.
type NodesSynced struct {
	Cluster string
	Nodes   []string
	Report  Report
	Err     error
}

// Passed is one pass the scheduler ran.
type Passed struct {
	Report Report
	Err    error
}

// Swept is what one sweep expired: approvals past approval.ttl, approved
// actions past orchestrate.schedule_ttl.
type Swept struct {
	Approvals, Schedules int
}

// Init readies every signal for the test tb.
func (ts *TestSignals) Init(tb testsignal.TB) {
	ts.Passed.Init(tb)
	ts.Swept.Init(tb)
	ts.NodesSynced.Init(tb)
}

// nodeClient is the HTTP client of one node, for the address (and the
// source) it was made for.
type nodeClient struct {
	addr    string
	guarded bool
	hc      *http.Client
}

// guard makes tr refuse to dial internal addresses (gossip.RefuseInternal).
func guard(tr *http.Transport) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: gossip.RefuseInternal}
	tr.DialContext = d.DialContext
}

// agentTransport is the transport of the plain client that reaches the
// agents: about one descriptor per node (docs/architecture.md, "One loop per
// cluster"). A cluster's loop never talks to a node twice at once, so one
// connection per node is kept alive between passes (no bound on the total:
// a fleet of 10,000 keeps 10,000, the reason for LimitNOFILE in the core's
// unit), and at most two are open to a node (a request of the API beside a
// sync) rather than one more per request. A connection idle for three
// intervals is closed. A node whose run child is on its agent (NEW or
// RUNNING) has one more, its run watcher's (watch.go, its own transport).
func agentTransport(interval time.Duration) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 1
	tr.MaxConnsPerHost = 2
	tr.IdleConnTimeout = max(90*time.Second, 3*interval)
	return tr
}

// baseTransport returns a copy of the transport of hc.
func baseTransport(hc *http.Client) *http.Transport {
	if base, isTr := hc.Transport.(*http.Transport); isTr {
		return base.Clone()
	}
	return http.DefaultTransport.(*http.Transport).Clone()
}

// New builds an orchestrator. It starts nothing. Its metrics go to reg
// (none when reg is nil).
func New(cfg Config, st store.Store, log *slog.Logger, reg prometheus.Registerer) (*Orchestrator, error) {
	cfg.fill()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc, ownHC := cfg.HTTPClient, cfg.HTTPClient == nil
	if ownHC {
		hc = &http.Client{Transport: agentTransport(cfg.Interval)}
	} else {
		c := *hc // a copy: the redirect rule below is the orchestrator's
		hc = &c
	}
	hc.CheckRedirect = noRedirect
	var guarded, wguarded *http.Client
	if cfg.RefuseInternalGossip {
		tr := baseTransport(hc)
		guard(tr)
		guarded = &http.Client{Transport: tr, CheckRedirect: noRedirect}
		wtr := watchTransport(hc)
		guard(wtr)
		wguarded = &http.Client{Transport: wtr, CheckRedirect: noRedirect}
	}
	whc := &http.Client{Transport: watchTransport(hc), CheckRedirect: noRedirect}
	if cfg.Rules == nil {
		cfg.Rules = &actions.Rules{Policy: live.New(approval.Policy{Default: approval.Required}), ScheduleTTL: cfg.ScheduleTTL}
	}
	m, err := newMetrics(reg, st)
	if err != nil {
		return nil, fmt.Errorf("orchestrator metrics: %w", err)
	}
	stopCtx, stopLoop := context.WithCancel(context.Background())
	return &Orchestrator{
		cfg: cfg, st: st, log: log.With("component", "orchestrate"), hc: hc, guarded: guarded, ownHC: ownHC, metrics: m,
		whc: whc, wguarded: wguarded, watch: watchSet{m: map[nodeKey]*watcher{}},
		rules:    cfg.Rules,
		clusters: map[string]*clusterState{},
		gone:     map[string]bool{},
		nudged:   map[string]bool{},
		wake:     make(chan struct{}, 1),
		stopCtx:  stopCtx, stopLoop: stopLoop,
	}, nil
}

// agentURL is the base URL of the agent at addr. An address with a scheme
// (a static node's URL) keeps it only without AgentTLS: with AgentTLS every
// node is reached over https, so that no address, whoever announced it, can
// choose plain HTTP and skip the identity check.
func (o *Orchestrator) agentURL(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		if o.cfg.AgentTLS == nil {
			return addr
		}
		addr = addr[i+len("://"):]
	}
	return o.cfg.Scheme + "://" + addr
}

// noRedirect keeps the orchestrator at the address discovery gave: an
// answer that redirects elsewhere (another host, plain HTTP, the core's own
// loopback) is taken as the node's answer, a status the pass does not
// accept, and is never followed.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// clusterLocked returns the state of a cluster, made on first use. o.mu is held.
func (o *Orchestrator) clusterLocked(id string) *clusterState {
	cs, ok := o.clusters[id]
	if !ok {
		cs = newClusterState(id)
		o.clusters[id] = cs
	}
	delete(o.gone, id)
	return cs
}

// runCtx is the context of the loops: Start's, or one Stop ends before it.
func (o *Orchestrator) runCtx() context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runCtxV != nil {
		return o.runCtxV
	}
	return o.stopCtx
}

// Nudge asks for a full sync of the cluster soon (after Debounce; nudges
// that come while one is pending or running make one more, not one each).
// It never blocks.
func (o *Orchestrator) Nudge(clusterID string) {
	o.mu.Lock()
	o.nudged[clusterID] = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Start runs the scheduler and the approval sweep until ctx ends or Stop is
// called. It returns at once.
func (o *Orchestrator) Start(ctx context.Context) error {
	ctx, done, err := o.StartInit(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.started, o.runCtxV = true, ctx
	for _, cs := range o.clusters {
		if len(cs.wantNodes) > 0 { // nudged before Start
			o.kick(cs)
		}
	}
	o.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); o.schedule(ctx) }()
	go func() { defer wg.Done(); o.sweep(ctx) }()
	go func() { defer wg.Done(); o.pollRuns(ctx) }()
	go func() { wg.Wait(); done() }()
	return nil
}

// Stop ends the scheduler, cancels the syncs under way (they write nothing
// once cancelled) and waits for the loops. It is idempotent.
func (o *Orchestrator) Stop() {
	o.mu.Lock()
	o.closed, o.started = true, false
	o.mu.Unlock()
	o.stopLoop()
	o.stopWakeups()
	o.Base.Stop()
	o.stopWatches()
	o.loops.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ownHC {
		o.hc.CloseIdleConnections()
	}
	if o.guarded != nil {
		o.guarded.CloseIdleConnections()
	}
	for _, cs := range o.clusters {
		for _, c := range cs.clients {
			c.hc.CloseIdleConnections()
		}
	}
}

// nodeClients gives every node of a sync its HTTP client: the shared one,
// or with AgentTLS one per node that checks the node's identity, kept
// between syncs while the node keeps its address. Called by the cluster's
// loop alone.
func (o *Orchestrator) nodeClients(cs *clusterState, nodes []*nodeResult) {
	guarded := o.guardedNode
	if o.cfg.AgentTLS == nil {
		for _, res := range nodes {
			res.hc = o.hc
			if guarded(&res.node) {
				res.hc = o.guarded
			}
		}
		return
	}
	for i := range nodes {
		n := &nodes[i].node
		c, ok := cs.clients[n.ID]
		if !ok || c.addr != n.Addr || c.guarded != guarded(n) {
			if ok {
				c.hc.CloseIdleConnections()
			}
			c = &nodeClient{addr: n.Addr, guarded: guarded(n), hc: o.peerClient(baseTransport(o.hc), n)}
			cs.clients[n.ID] = c
		}
		nodes[i].hc = c.hc
	}
}

// guardedNode reports whether the clients that reach node n refuse
// internal addresses: a node gossip announced, with RefuseInternalGossip.
func (o *Orchestrator) guardedNode(n *store.Node) bool {
	return o.cfg.RefuseInternalGossip && n.Source == store.SourceGossip
}

// peerClient is a client of node n's own over tr (with AgentTLS): tr
// refuses internal addresses when n is guarded, and accepts only n's
// certificate (an enrolled certificate names its cluster: n1 of another
// cluster is not this node).
func (o *Orchestrator) peerClient(tr *http.Transport, n *store.Node) *http.Client {
	if o.guardedNode(n) {
		guard(tr)
	}
	tr.TLSClientConfig = tlsutil.ForPeer(tlsutil.InCluster(o.cfg.AgentTLS, n.ClusterID), tlsutil.Agent(n.ID))
	return &http.Client{Transport: tr, CheckRedirect: noRedirect}
}

// forgetNodes drops what the loop keeps of the nodes a full sync no longer
// lists (keep are those it lists): their clients, closed, their last
// contact and the cursor last acknowledged to them. Called by the cluster's
// loop alone.
func forgetNodes(cs *clusterState, keep []string) {
	in := make(map[string]bool, len(keep))
	for _, id := range keep {
		in[id] = true
	}
	for id, c := range cs.clients {
		if !in[id] {
			c.hc.CloseIdleConnections()
			delete(cs.clients, id)
		}
	}
	for id := range cs.lastContact {
		if !in[id] {
			delete(cs.lastContact, id)
		}
	}
	for id := range cs.acked {
		if !in[id] {
			delete(cs.acked, id)
		}
	}
}

// slot is the scheduler's view of one cluster; only the scheduler goroutine
// touches it.
type slot struct {
	due     time.Time
	running bool
	again   bool // nudged while running
}

func (o *Orchestrator) jitter() time.Duration {
	d := o.cfg.Interval
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// schedule is the scheduler: it asks the loops of due clusters for a full
// sync while fewer than Workers run, and sleeps until the next one is due,
// a nudge or a full sync ends.
func (o *Orchestrator) schedule(ctx context.Context) {
	var passes sync.WaitGroup
	defer passes.Wait()
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
				slots[id] = &slot{due: now} // a new cluster gets a pass at once
			}
		}
		for id, s := range slots {
			if !keep[id] && !s.running {
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
			for id, s := range slots {
				if !s.running && !s.due.After(now) && (next == "" || s.due.Before(slots[next].due)) {
					next = id
				}
			}
			if next == "" {
				break
			}
			slots[next].running = true
			busy++
			passes.Add(1)
			go func(id string) {
				defer passes.Done()
				rep, ok, err := o.fullSync(ctx, id)
				if !ok { // another replica holds the cluster's lease
					finished <- id
					return
				}
				switch {
				case errors.Is(err, store.ErrFenced):
					o.metrics.latePushes.Add(float64(rep.Pushed))
					o.log.Info("pass refused: the lease was lost", "cluster", id, "pushed", rep.Pushed)
				case err != nil && ctx.Err() == nil:
					o.log.Warn("pass failed", "cluster", id, "err", err)
				case rep.Changes > 0:
					o.log.Debug("pass", "cluster", id, "nodes", rep.Nodes, "down", rep.Down,
						"pushed", rep.Pushed, "changes", rep.Changes, "events", rep.Events)
				}
				o.TestSignals.Passed.Send(Passed{Report: rep, Err: err})
				finished <- id
			}(next)
		}
		wait := nextRefresh.Sub(now)
		if busy < o.cfg.Workers {
			for _, s := range slots {
				if d := s.due.Sub(now); !s.running && d < wait {
					wait = d
				}
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-o.wake:
			o.mu.Lock()
			nudged := o.nudged
			o.nudged = map[string]bool{}
			o.mu.Unlock()
			now = time.Now()
			for id := range nudged {
				s, ok := slots[id]
				if !ok {
					refresh(now)
					if s, ok = slots[id]; !ok {
						continue // not a cluster (yet)
					}
				}
				if s.running {
					s.again = true
				} else if d := now.Add(o.cfg.Debounce); d.Before(s.due) {
					s.due = d
				}
			}
		case id := <-finished:
			busy--
			if s, ok := slots[id]; ok {
				s.running = false
				if s.again {
					s.again, s.due = false, time.Now().Add(o.cfg.Debounce)
				} else {
					s.due = time.Now().Add(o.jitter())
				}
			}
		}
	}
}

// passContext returns the context of one pass of the cluster, or ok false
// when another replica holds its lease.
func (o *Orchestrator) passContext(ctx context.Context, id string) (context.Context, context.CancelFunc, bool) {
	if o.cfg.Leases == nil {
		return ctx, func() {}, true
	}
	return o.cfg.Leases.PassContext(ctx, id)
}

// sweep runs ExpireApprovals, ExpireSchedules and the runs' expiry every
// SweepEvery until ctx ends.
func (o *Orchestrator) sweep(ctx context.Context) {
	// It runs whatever the TTLs at start: a reload may give approvals
	// one (an idle sweep only reads).
	t := time.NewTicker(o.cfg.SweepEvery)
	defer t.Stop()
	for {
		var sw Swept
		var err error
		if sw.Approvals, err = o.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("approval expiry failed", "err", err)
		}
		if sw.Schedules, err = o.ExpireSchedules(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("schedule expiry failed", "err", err)
		}
		if _, err := o.expireRuns(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("run expiry failed", "err", err)
		}
		o.TestSignals.Swept.Send(sw)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expire runs fn in an Update, after a read finds that there is work for it
// (so an idle sweep takes no write transaction), and returns how many
// records it changed.
func (o *Orchestrator) expire(ctx context.Context, pending func(r store.Reader, cutoff time.Time) ([]store.Record, error),
	ttl time.Duration, fn func(ctx context.Context, tx store.Tx) ([]*store.Record, error)) ([]*store.Record, error) {
	if ttl <= 0 {
		return nil, nil
	}
	var n int
	err := o.st.Read(ctx, func(r store.Reader) error {
		recs, err := pending(r, action.UTC(time.Now()).Add(-ttl))
		n = len(recs)
		return err
	})
	if err != nil || n == 0 {
		return nil, err
	}
	var out []*store.Record
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		out, err = fn(ctx, tx)
		return err
	})
	return out, err
}

// ExpireApprovals cancels, with reason "expired" and an action.expired event,
// every PENDING_APPROVE action created more than the approval policy's TTL
// ago (as it is now)
// (actions.Rules.ExpireApprovals). It returns how many it expired, and
// writes nothing when there are none.
func (o *Orchestrator) ExpireApprovals(ctx context.Context) (int, error) {
	out, err := o.expire(ctx, func(r store.Reader, cutoff time.Time) ([]store.Record, error) {
		return r.ApprovalsBefore(ctx, cutoff)
	}, o.rules.Policy.Load().TTL, o.rules.ExpireApprovals)
	if err != nil {
		return 0, fmt.Errorf("expire approvals: %w", err)
	}
	o.metrics.expired.Add(float64(len(out)))
	return len(out), nil
}

// ExpireSchedules ends every PENDING_SCHEDULE action that has not reached
// its agent ScheduleTTL after it was scheduled: CANCELLED with reason
// "schedule timeout", or a cancel request when a push was attempted
// (actions.Rules.ExpireSchedules). It returns how many it changed, and
// writes nothing when there are none.
func (o *Orchestrator) ExpireSchedules(ctx context.Context) (int, error) {
	out, err := o.expire(ctx, func(r store.Reader, cutoff time.Time) ([]store.Record, error) {
		return r.ScheduledBefore(ctx, cutoff)
	}, o.rules.ScheduleTTL, o.rules.ExpireSchedules)
	if err != nil {
		return 0, fmt.Errorf("expire schedules: %w", err)
	}
	clusters := map[string]bool{}
	for _, r := range out {
		if r.CancelRequested && !clusters[r.ClusterID] {
			clusters[r.ClusterID] = true
			o.Nudge(r.ClusterID)
		}
	}
	return len(out), nil
}

// DropAgentConnections closes the kept connections to every agent and
// forgets the per-node clients, so that the next call to any agent makes a
// new TLS handshake. The core calls it when the revocation list changes: a
// revoked agent is refused at once, not when its kept connection ends.
//
// The clients belong to the clusters' loops: a loop that runs drops its own
// before it next talks to an agent; those of a parked loop are dropped here.
func (o *Orchestrator) DropAgentConnections() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, cs := range o.clusters {
		if cs.running {
			cs.dropClients = true
			select {
			case cs.wake <- struct{}{}:
			default:
			}
			continue
		}
		dropClients(cs)
	}
}

// dropClients closes and forgets every per-node client of the cluster.
// Called by its loop, or under o.mu while it is parked.
func dropClients(cs *clusterState) {
	for id, c := range cs.clients {
		c.hc.CloseIdleConnections()
		delete(cs.clients, id)
	}
}
