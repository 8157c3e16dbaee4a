// Package orchestrate is the only part of the core that talks to agents.
// Each cluster has one loop (loop.go, docs/architecture.md, "One loop per
// cluster") and one pipeline, "sync a set of nodes": pull the nodes' changed
// actions, reconcile them with the core's records (the agent wins every
// conflict), push PENDING_SCHEDULE actions and pending cancels, and commit
// it under the lease's fencing epoch, or nothing when nothing changed.
//
// The Orchestrator asks each cluster's loop for a full sync (a sync of every
// node) every Interval (with jitter), at most Workers clusters at once, and
// early when a cluster is nudged; a nudge of a node asks for a sync of that
// node. Beside the loops run its parts, each a shared/startstop service: the
// wake-ups of held actions, the run watches and polls, the expiry sweep and
// the scheduler.
//
// The files are split by concern, and a file calls only into files below it
// (docs/architecture.md lists the rows, which a doc check keeps true): this
// file builds the orchestrator and starts and stops its parts; cluster.go
// takes the requests; loop.go decides which sync starts when; fullsync.go
// steps the full syncs; pipeline.go sends nodes to the workers and commits
// their answers; below them are the reads, the commit and plan, the
// conversation with one agent, the holds, the advancer, the watches, the
// wake-ups and the clients.
package orchestrate

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/tracing"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testsignal"
)

// Config tunes the orchestrator. Zero fields take the DefaultConfig values.
type Config struct {
	// Interval between two full syncs of one cluster; each wait is jittered ±10%.
	Interval time.Duration
	// Workers bounds the full syncs running at once, over all clusters.
	Workers int
	// MaxQueuedPerNode bounds the NEW and RUNNING actions of one agent.
	MaxQueuedPerNode int
	// CompareIDsEvery: every this many turns of a node in the spread
	// (FullSyncEvery), its sync lists every record of its agent and
	// compares id sets (LOST detection); with one slice, every node at
	// every this many full syncs.
	CompareIDsEvery int
	// FullSyncEvery: every node of a cluster is fully synced (info and
	// changes, whatever its change counter says) at least once this
	// often, its turn spread evenly over the period (spread.go); between
	// turns a full sync only asks its change counter. 0: scaled with the
	// cluster (ScaledFullSyncEvery).
	FullSyncEvery time.Duration
	// CounterEvery: between its full turns, a node's change counter is
	// asked once this often, the asks spread evenly over the period
	// (spread.go); a full sync leaves the others that have no work (to push,
	// to cancel, in flight) as stored, without a request. 0: scaled with the
	// cluster (ScaledCounterEvery): Interval, or 1 ms a node when longer.
	// A direct FullSync asks every node's.
	CounterEvery time.Duration
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
	// kept in memory and stored with the node whenever something else of
	// it is written (its status going DOWN), and alone at most this often
	// when positive. 0 (the default): never alone, so that an idle fleet
	// writes nothing.
	ContactEvery time.Duration
	// PageSize is the limit of one GET actions page.
	PageSize int
	// Debounce delays a nudged full sync so that a burst of nudges makes one
	// full sync.
	Debounce time.Duration
	// RunPoll is how often the nodes holding an unfinished child of a
	// running run are synced (those nodes alone), so that a run's next wave
	// does not wait for the interval when no gossip note tells of the end.
	RunPoll time.Duration
	// NoRunWatch turns the run watches off (watch.go): the ends of a run's
	// children are then seen at the polls of RunPoll alone, without gossip.
	NoRunWatch bool
	// MaxWatches bounds the watches held at once (0: DefaultMaxWatches):
	// each is a goroutine and a connection. A node with work in flight
	// beyond it is synced at every pass and by the run polls instead.
	MaxWatches int
	// AgentIdleConns bounds the idle connections the plain client (nil
	// HTTPClient, no AgentTLS) keeps to agents between syncs, over all
	// nodes; 0: one per node, unbounded (clients.go, agentTransport).
	AgentIdleConns int
	// HTTPClient reaches the agents (with the agents' TLS settings). Nil
	// uses a plain client that keeps one idle connection to every node
	// between syncs and opens at most two to a node (the standard
	// library's default keeps 100 in all, so a larger fleet would reconnect
	// to most nodes on every full sync); requests carry their own timeouts.
	HTTPClient *http.Client
	// Scheme is put before agent addresses that have none: "http" (default)
	// or "https". With AgentTLS it is always "https".
	Scheme string
	// Leases, when set, decides which clusters this replica syncs (several core
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
	// cluster and node id; a sync lays the agent's own labels (from its
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
	// Members is the clusters' declared membership (docs/architecture.md,
	// "Declared membership"): a full sync makes a cluster ALERT while a
	// declared node is missing. nil: none declared.
	Members *live.Value[nodes.Membership]
	// ReapAfter is how long a node its cluster does not declare may be DOWN
	// before the lease holder's full sync forgets it, with a node.reaped
	// event (docs/architecture.md, "Declared membership"); never below a
	// declared count's floor. 0: never (DefaultConfig: 72 h).
	ReapAfter time.Duration
	// Now is the clock of the commits (the status a node has had for how
	// long); nil: time.Now.
	Now func() time.Time
	// Runs, when set, moves runs on at every full sync and after the commits
	// that may let them move (core/runs).
	Runs Runs
	// RefuseInternalGossip: nodes found through gossip are never dialled at
	// a loopback, link-local or unspecified IP address, whatever their host
	// name resolves to (the core is off loopback and gossip.insecure is not
	// set; docs/security.md). Static nodes are not concerned.
	RefuseInternalGossip bool
	// Tracer, when set, gets the spans of pushes and pulls, and gives each
	// pushed action its traceparent (docs/architecture.md, "Traces"); nil:
	// no tracing.
	Tracer *tracing.Tracer
}

// DefaultConfig returns the defaults (docs/architecture.md, "Configuration").
func DefaultConfig() Config {
	return Config{
		Interval:         10 * time.Second,
		Workers:          8,
		MaxQueuedPerNode: 16,
		CompareIDsEvery:  6,
		AgentTimeout:     5 * time.Second,
		ScheduleTTL:      24 * time.Hour,
		NodeConcurrency:  16,
		BatchSize:        256,
		PageSize:         500,
		Debounce:         50 * time.Millisecond,
		RunPoll:          250 * time.Millisecond,
		Scheme:           "http",
		ReapAfter:        nodes.DefaultReapAfter,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Interval <= 0 {
		c.Interval = d.Interval
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.MaxQueuedPerNode <= 0 {
		c.MaxQueuedPerNode = d.MaxQueuedPerNode
	}
	if c.CompareIDsEvery <= 0 {
		c.CompareIDsEvery = d.CompareIDsEvery
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
	if c.PageSize <= 0 {
		c.PageSize = d.PageSize
	}
	if c.Debounce <= 0 {
		c.Debounce = d.Debounce
	}
	if c.RunPoll <= 0 {
		c.RunPoll = d.RunPoll
	}
	if c.MaxWatches <= 0 {
		c.MaxWatches = DefaultMaxWatches
	}
	if c.Scheme == "" {
		c.Scheme = d.Scheme
	}
	if c.AgentTLS != nil {
		c.Scheme = "https"
	}
}

// Errors of Start (shared/startstop's).
var (
	ErrStarted = startstop.ErrStarted
	ErrStopped = startstop.ErrStopped
)

// Orchestrator runs the clusters' loops. Build it with New, run it with
// Start, end it with Stop. FullSync, SyncNodes, ExpireApprovals and
// ExpireSchedules may also be called directly.
type Orchestrator struct {
	cfg     Config
	st      store.Store
	rules   *actions.Rules
	log     *slog.Logger
	hc      *http.Client
	guarded *http.Client // hc's twin for gossip nodes, with RefuseInternalGossip (else nil)
	ownHC   bool         // hc was made here: Stop closes its idle connections
	metrics *metrics

	startstop.Base
	mu       sync.Mutex
	clusters map[string]*clusterState
	gone     map[string]bool // clusters the store lacks: dropped when their loop parks
	started  bool            // Start ran: nudges are served
	closed   bool            // Stop ran: no loop starts
	runCtxV  context.Context // Start's context
	loops    sync.WaitGroup  // the clusters' loops
	// stopCtx ends at Stop: the loops' context before Start, and a bound on
	// direct calls.
	stopCtx  context.Context
	stopLoop context.CancelFunc

	// advancers move the clusters' runs on beside their loops (advance.go).
	advancers *advancers
	// coreSteps run the gates and calls of the clusters' runs beside their
	// loops (corestep.go).
	coreSteps *coreSteppers
	// The parts beside the loops, each a shared/startstop part, in the
	// order Start starts them (services).
	wakeups   *wakeups   // nudge the nodes of held actions when they may go (wakeup.go)
	watches   *watches   // the run watches (watch.go)
	runPoller *runPoller // the run polls (runpoll.go)
	sweeper   *sweeper   // the expiry sweep (sweep.go)
	scheduler *scheduler // the full syncs every Interval (scheduler.go)

	// TestSignals lets a test wait for the orchestrator to reach a point;
	// they do nothing unless a test calls Init.
	TestSignals TestSignals
}

// TestSignals are the points a test can wait for.
type TestSignals struct {
	// FullSynced carries every full sync the scheduler ran, once it
	// returned.
	FullSynced testsignal.Signal[FullSynced]
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

// FullSynced is one full sync the scheduler ran.
type FullSynced struct {
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
	ts.FullSynced.Init(tb)
	ts.Swept.Init(tb)
	ts.NodesSynced.Init(tb)
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
		hc = &http.Client{Transport: agentTransport(cfg.Interval, cfg.AgentIdleConns)}
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
	o := &Orchestrator{
		cfg: cfg, st: st, log: log.With("component", "orchestrate"), hc: hc, guarded: guarded, ownHC: ownHC, metrics: m,
		rules:    cfg.Rules,
		clusters: map[string]*clusterState{},
		gone:     map[string]bool{},
		stopCtx:  stopCtx, stopLoop: stopLoop,
	}
	o.advancers = newAdvancers(o, o.NudgeNode)
	o.coreSteps = newCoreSteppers(o, o.advancers.request)
	o.wakeups = newWakeups(o.NudgeNode)
	o.watches = &watches{o: o, nudge: o.NudgeNode, hc: whc, guarded: wguarded, m: map[nodeKey]*watcher{}}
	o.runPoller = newRunPoller(o, o.watches, o.NudgeNode)
	o.sweeper = newSweeper(o, o.Nudge)
	o.scheduler = newScheduler(o)
	return o, nil
}

// services are the parts beside the loops, in the order Start starts them;
// Stop stops them in the reverse one.
func (o *Orchestrator) services() []startstop.Service {
	return []startstop.Service{o.wakeups, o.watches, o.runPoller, o.sweeper, o.scheduler}
}

// Nudge asks for a full sync of the cluster soon (after Debounce; nudges
// that come while one is pending or running make one more, not one each).
// It never blocks.
func (o *Orchestrator) Nudge(clusterID string) { o.scheduler.nudge(clusterID) }

// ExpireApprovals cancels, with reason "expired" and an action.expired
// event, every PENDING_APPROVE action created more than the approval
// policy's TTL ago (as it is now) (actions.Rules.ExpireApprovals). It
// returns how many it expired, and writes nothing when there are none.
func (o *Orchestrator) ExpireApprovals(ctx context.Context) (int, error) {
	return o.sweeper.expireApprovals(ctx)
}

// ExpireSchedules ends every PENDING_SCHEDULE action that has not reached
// its agent ScheduleTTL after it was scheduled: CANCELLED with reason
// "schedule timeout", or a cancel request when a push was attempted
// (actions.Rules.ExpireSchedules). It returns how many it changed, and
// writes nothing when there are none.
func (o *Orchestrator) ExpireSchedules(ctx context.Context) (int, error) {
	return o.sweeper.expireSchedules(ctx)
}

// Start serves the nudges and starts the parts beside the loops (the
// wake-ups, the run watches and polls, the expiry sweep, the scheduler)
// until ctx ends or Stop is called. It returns at once.
func (o *Orchestrator) Start(ctx context.Context) error {
	ctx, done, err := o.StartInit(ctx)
	if err != nil {
		return err
	}
	defer done() // the parts' goroutines are theirs: Stop stops them
	o.mu.Lock()
	o.runCtxV = ctx
	o.mu.Unlock()
	// The parts before the nudges are served: the loops' commits may start
	// run watches and arm wake-ups.
	parts := o.services()
	for i, s := range parts {
		if err := s.Start(ctx); err != nil {
			// Nothing will call Stop: the parts already started stop here.
			for _, started := range slices.Backward(parts[:i]) {
				started.Stop()
			}
			return fmt.Errorf("orchestrator: %w", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil // Stop came first: it stopped the parts
	}
	o.started = true
	for _, cs := range o.clusters {
		if cs.nodes.Len() > 0 { // nudged before Start
			o.kick(cs)
		}
	}
	return nil
}

// Stop ends the parts beside the loops, cancels the syncs under way (they
// write nothing once cancelled) and waits for the loops and the advancers.
// It is idempotent.
func (o *Orchestrator) Stop() {
	o.mu.Lock()
	o.closed, o.started = true, false
	for _, cs := range o.clusters {
		cs.nodes.ShutDown()
	}
	o.mu.Unlock()
	o.advancers.close()
	o.coreSteps.close()
	o.stopLoop()
	o.Base.Stop()
	for _, s := range slices.Backward(o.services()) {
		s.Stop()
	}
	o.loops.Wait()
	o.advancers.wait()
	o.coreSteps.wait()
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
