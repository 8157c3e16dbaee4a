package orchestrate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Report says what one pass did.
type Report struct {
	Cluster string
	// Nodes counts the nodes synced, Down those found unreachable or not who
	// they should be.
	Nodes, Down int
	// Pulled counts the records the agents returned; Pushed the actions the
	// agents accepted; Cancels the cancel requests they accepted.
	Pulled, Pushed, Cancels int
	// Changes counts the records, nodes and cluster written; Events the
	// events appended. Both are zero when the pass wrote nothing.
	Changes, Events int
	// Full is true when this pass compared id sets (every FullSyncEvery passes).
	Full bool
}

// opKind is what a node sync learnt about one action.
type opKind int

const (
	opAgent       opKind = iota // the agent's record (pull, push or cancel answer)
	opGone                      // the agent answered 410 to a push
	opRefused                   // the agent answered 422 to a push
	opReapprove                 // the content no longer matches its approval
	opLost                      // a full listing lacks an action the agent held
	opCancelled                 // a cancel-requested action the agent never received
	opUnconfirmed               // pushed to an agent database since replaced, without an answer
)

type op struct {
	kind opKind
	id   string
	rec  *action.Action
	msg  string
}

// nodeResult is what syncing one node learnt, before anything is written.
type nodeResult struct {
	node    store.Node   // as read at the start of the pass
	hc      *http.Client // reaches the node's agent
	open    []store.Record
	status  string
	reason  string
	info    *wire.AgentInfo
	storeID string
	cursor  int64
	ops     []op
	pulled  int
	pushed  int
	cancels int
	// stray lists the ids to cancel that the core already holds CANCELLED;
	// settled the cancels the agent no longer needs.
	stray   []string
	settled []string
	// held: discovery held the node DOWN, so the pass did not contact it.
	held bool
}

// Pass runs one orchestration pass of a cluster (DESIGN.md §5): it syncs
// every node at once (bounded), then commits what changed in one Update, or
// writes nothing when nothing changed. Passes of one cluster never overlap:
// a second call waits for the first.
func (o *Orchestrator) Pass(ctx context.Context, clusterID string) (Report, error) {
	cs := o.cluster(clusterID)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	start := time.Now()
	rep, err := o.pass(ctx, cs)
	o.metrics.observePass(time.Since(start), rep, err)
	return rep, err
}

func (o *Orchestrator) pass(ctx context.Context, cs *clusterState) (Report, error) {
	rep := Report{Cluster: cs.id, Full: cs.passes%o.cfg.FullSyncEvery == 0}
	// The runs' next waves are created first, so this pass pushes them.
	if _, err := o.advanceRuns(ctx, cs.id); err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	}
	var nodes []nodeResult
	err := o.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Cluster(ctx, cs.id); err != nil {
			return err
		}
		ns, err := r.Nodes(ctx, cs.id)
		if err != nil {
			return err
		}
		// One query for the cluster, not one per node.
		all, err := r.OpenActions(ctx, cs.id, "")
		if err != nil {
			return err
		}
		open := map[string][]store.Record{}
		for _, a := range all {
			open[a.NodeID] = append(open[a.NodeID], a)
		}
		for _, n := range ns {
			res := nodeResult{node: n, open: open[n.ID]}
			for id, node := range cs.strays {
				if node == n.ID {
					res.stray = append(res.stray, id)
				}
			}
			sort.Strings(res.stray)
			nodes = append(nodes, res)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	}
	cs.passes++
	o.nodeClients(cs, nodes)

	var wg sync.WaitGroup
	sem := make(chan struct{}, o.cfg.NodeConcurrency)
	for _, i := range syncOrder(nodes) {
		if n := &nodes[i].node; store.DownByDiscovery(n) {
			// The gossip pool holds it DOWN: not contacted until the pool
			// sees it again.
			nodes[i].held, nodes[i].status, nodes[i].reason = true, n.Status, n.StatusReason
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(res *nodeResult) {
			defer func() { <-sem; wg.Done() }()
			o.syncNode(ctx, res, rep.Full)
		}(&nodes[i])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err // answers cut short by shutdown are not the agents' word
	}

	now := action.UTC(time.Now())
	for _, res := range nodes {
		rep.Nodes++
		if res.status != store.NodeUp {
			rep.Down++
		} else {
			cs.lastContact[res.node.ID] = now
		}
		for _, id := range res.settled {
			delete(cs.strays, id)
		}
		rep.Pulled += res.pulled
		rep.Pushed += res.pushed
		rep.Cancels += res.cancels
	}

	var w *writePlan
	err = o.st.Read(ctx, func(r store.Reader) error {
		var err error
		w, err = o.plan(ctx, r, cs, nodes, now)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	}
	if w.empty() {
		return rep, nil
	}
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if w, err = o.plan(ctx, tx, cs, nodes, now); err != nil {
			return err
		}
		return w.apply(ctx, tx)
	})
	if err != nil {
		return rep, fmt.Errorf("pass of %s: commit: %w", cs.id, err)
	}
	rep.Changes, rep.Events = w.changes(), len(w.events)
	// Children that finished in this pass may admit the next wave: create it
	// now and ask for the pass that pushes it.
	if created, err := o.advanceRuns(ctx, cs.id); err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	} else if created > 0 {
		o.Nudge(cs.id)
	}
	return rep, nil
}

// syncOrder lists the indexes of nodes in the order their syncs start:
// first the nodes with an action to push or a cancel to send, so that the
// pass an approval nudges reaches that agent after a few node syncs, not
// after half the fleet; then the others, in their order.
func syncOrder(nodes []nodeResult) []int {
	busy := func(res *nodeResult) bool {
		if len(res.stray) > 0 {
			return true
		}
		for i := range res.open {
			if r := &res.open[i]; r.State == action.PendingSchedule || r.CancelRequested {
				return true
			}
		}
		return false
	}
	order := make([]int, 0, len(nodes))
	for i := range nodes {
		if busy(&nodes[i]) {
			order = append(order, i)
		}
	}
	for i := range nodes {
		if !busy(&nodes[i]) {
			order = append(order, i)
		}
	}
	return order
}

// call runs one agent request with the agent timeout.
func call[T any](ctx context.Context, timeout time.Duration, fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}

// downReason turns an agent error into a status reason that stays the same
// from one pass to the next while the cause does (so it is not rewritten).
func downReason(err error) string {
	if s := client.StatusOf(err); s != 0 {
		return fmt.Sprintf("agent answered %d %s", s, http.StatusText(s))
	}
	var (
		ie  *tlsutil.IdentityError
		ua  x509.UnknownAuthorityError
		inv x509.CertificateInvalidError
		rh  tls.RecordHeaderError
		al  tls.AlertError
	)
	switch {
	case errors.As(err, &ie):
		return fmt.Sprintf("%s: the certificate at this address is %s", ReasonIdentityMismatch, ie.Got)
	case errors.As(err, &ua):
		return "tls: the agent's certificate is not signed by agents_tls.ca_file"
	case errors.As(err, &inv):
		return "tls: the agent's certificate is not valid: " + inv.Error()
	case errors.As(err, &rh):
		return "tls: the agent does not answer TLS"
	case errors.As(err, &al):
		return "tls: the agent refused the handshake (" + al.Error() + "); check agents_tls.cert_file"
	}
	return ReasonUnreachable
}

// syncNode talks to one agent: info, pull, push, cancels. It touches no
// store: what it learns goes into res.
func (o *Orchestrator) syncNode(ctx context.Context, res *nodeResult, full bool) {
	n := &res.node
	log := o.log.With("cluster", n.ClusterID, "node", n.ID)
	res.storeID, res.cursor = n.StoreID, n.Cursor
	ag := client.NewAgent(o.agentURL(n.Addr), res.hc)

	info, err := call(ctx, o.cfg.AgentTimeout, ag.Info)
	if err != nil {
		res.status, res.reason = store.NodeDown, downReason(err)
		log.Debug("agent info failed", "err", err)
		return
	}
	if info.NodeID != n.ID || info.ClusterID != n.ClusterID {
		res.status, res.reason = store.NodeDown, ReasonIdentityMismatch
		log.Warn("agent identity mismatch", "addr", n.Addr, "agent_node", info.NodeID, "agent_cluster", info.ClusterID)
		return
	}

	// Pull. A new store id means the agent's database was replaced: list
	// everything and compare id sets. So does every FullSyncEvery-th pass.
	storeChanged := n.StoreID != "" && n.StoreID != info.StoreID
	if storeChanged {
		log.Warn("agent database replaced: full listing", "old_store_id", n.StoreID, "store_id", info.StoreID)
	}
	listAll := full || storeChanged || n.StoreID == ""
	since, ack := n.Cursor, true
	if listAll {
		since, ack = 0, false
	}
	pulled, order, since, err := o.pull(ctx, ag, since, ack)
	res.pulled += len(order)
	if err != nil {
		res.status, res.reason = store.NodeDown, downReason(err)
		log.Debug("agent pull failed", "err", err)
		res.ops = pulledOps(order, pulled) // what came is still the agent's word
		return
	}
	res.status, res.reason, res.info = store.NodeUp, "", info
	res.storeID, res.cursor = info.StoreID, since
	res.ops = pulledOps(order, pulled)

	if listAll {
		for _, r := range res.open {
			if r.SeenOnAgent && !r.State.Final() && r.State.OnAgent() && pulled[r.ID] == nil {
				res.ops = append(res.ops, op{kind: opLost, id: r.ID, msg: ReasonMissing})
			}
		}
	}
	// An action pushed to a database the agent no longer has, whose answer
	// never came back, may have run there: it is LOST, never pushed again.
	for _, r := range res.open {
		if r.State == action.PendingSchedule && r.PushedStoreID != "" && r.PushedStoreID != info.StoreID && pulled[r.ID] == nil {
			res.ops = append(res.ops, op{kind: opUnconfirmed, id: r.ID, msg: ReasonUnconfirmed})
		}
	}

	o.pushPending(ctx, ag, res, pulled, log)
	o.sendCancels(ctx, ag, res, pulled, log)

	// What the agent accepted bumped its change sequence: pull once more so
	// that the cursor committed by this pass covers it, and the next pass
	// finds nothing new.
	if res.pushed > 0 || res.cancels > 0 {
		more, order, next, err := o.pull(ctx, ag, res.cursor, false)
		if err != nil {
			log.Debug("agent pull after push failed", "err", err)
			return
		}
		res.pulled += len(order)
		res.ops = append(res.ops, pulledOps(order, more)...)
		res.cursor = next
	}
}

// pull lists the agent's changes after since, page by page. Only the first
// request carries ack: the caller acknowledges the cursor committed by the
// previous pass, never one it has not stored yet. On error it returns what
// it got so far and the cursor it did not get past.
func (o *Orchestrator) pull(ctx context.Context, ag *client.Agent, since int64, ack bool) (map[string]*action.Action, []string, int64, error) {
	pulled := map[string]*action.Action{}
	var order []string
	for {
		page, err := call(ctx, o.cfg.AgentTimeout, func(ctx context.Context) (*wire.ChangesPage, error) {
			return ag.Changes(ctx, since, o.cfg.PageSize, ack)
		})
		if err != nil {
			return pulled, order, since, err
		}
		ack = false
		for i := range page.Actions {
			a := &page.Actions[i]
			if _, ok := pulled[a.ID]; !ok {
				order = append(order, a.ID)
			}
			pulled[a.ID] = a
		}
		if page.More && page.NextCursor <= since {
			return pulled, order, since, fmt.Errorf("agent cursor did not advance past %d", since)
		}
		since = page.NextCursor
		if !page.More || len(page.Actions) == 0 {
			return pulled, order, since, nil
		}
	}
}

func pulledOps(order []string, pulled map[string]*action.Action) []op {
	ops := make([]op, 0, len(order))
	for _, id := range order {
		ops = append(ops, op{kind: opAgent, id: id, rec: pulled[id]})
	}
	return ops
}

// pushPending sends the node's PENDING_SCHEDULE actions in creation order, as many
// as the agent's queue has room for.
func (o *Orchestrator) pushPending(ctx context.Context, ag *client.Agent, res *nodeResult, pulled map[string]*action.Action, log *slog.Logger) {
	room := o.cfg.MaxQueuedPerNode - res.info.Queue[action.New] - res.info.Queue[action.Running]
	var batch []*store.Record
	for i := range res.open {
		r := &res.open[i]
		if r.State != action.PendingSchedule || pulled[r.ID] != nil {
			continue
		}
		if r.PushedStoreID != "" && r.PushedStoreID != res.info.StoreID {
			continue // LOST by this pass (opUnconfirmed)
		}
		if r.CancelRequested {
			o.settleCancel(ctx, ag, res, r, log)
			continue
		}
		if !approvalHolds(r) {
			res.ops = append(res.ops, op{kind: opReapprove, id: r.ID})
			continue
		}
		if room <= 0 {
			break
		}
		batch = append(batch, r)
		room--
	}
	if len(batch) == 0 {
		return
	}
	// Record durably, before anything is sent, which agent database the
	// pushes go to. Only actions still PENDING_SCHEDULE and not cancelled at
	// that moment are sent: a cancel or an edit that committed meanwhile wins.
	batch, err := o.markPushed(ctx, batch, res.info.StoreID)
	if err != nil {
		log.Warn("record pushes; none sent this pass", "err", err)
		return
	}
	for _, r := range batch {
		req := &wire.PushRequest{ID: r.ID, Kind: r.Kind, Args: r.Args, TimeoutS: r.TimeoutS,
			CreatedTS: &r.CreatedTS, Origin: r.Origin, Requester: r.Requester, ApprovedBy: r.ApprovedBy,
			ClusterID: r.ClusterID, NodeID: r.NodeID}
		ctx, cancel := context.WithTimeout(ctx, o.cfg.AgentTimeout)
		a, status, err := ag.Push(ctx, req)
		cancel()
		switch {
		case err == nil:
			res.ops = append(res.ops, op{kind: opAgent, id: r.ID, rec: a})
			res.pushed++
			o.metrics.pushes.WithLabelValues(strconv.Itoa(status)).Inc()
		case client.StatusOf(err) == http.StatusGone:
			res.ops = append(res.ops, op{kind: opGone, id: r.ID, msg: ReasonGone})
			o.metrics.pushes.WithLabelValues("410").Inc()
		case client.StatusOf(err) == http.StatusUnprocessableEntity:
			msg := "refused by the agent"
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Detail.Message != "" {
				msg = ae.Detail.Message
			}
			res.ops = append(res.ops, op{kind: opRefused, id: r.ID, msg: msg})
			o.metrics.pushes.WithLabelValues("422").Inc()
		case client.StatusOf(err) == 0:
			// The request may not have arrived: the action stays
			// PENDING_SCHEDULE and is sent again, with the same id, next pass.
			o.metrics.pushes.WithLabelValues("error").Inc()
			log.Debug("push failed; retried next pass", "action", r.ID, "err", err)
			return
		default:
			// Any other answer (a 5xx, a proxy's 502) may hide a delivery:
			// stop here so that no later action overtakes this one.
			o.metrics.pushes.WithLabelValues(strconv.Itoa(client.StatusOf(err))).Inc()
			log.Warn("push refused; retried next pass", "action", r.ID, "err", err)
			return
		}
	}
}

// markPushed sets PushedStoreID on the records of batch that are still
// PENDING_SCHEDULE and not cancel-requested, in one transaction, and returns
// those.
func (o *Orchestrator) markPushed(ctx context.Context, batch []*store.Record, storeID string) ([]*store.Record, error) {
	var out []*store.Record
	err := o.st.Update(ctx, func(tx store.Tx) error {
		out = out[:0]
		for _, r := range batch {
			cur, err := tx.Action(ctx, r.ID)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				return err
			}
			if cur.State != action.PendingSchedule || cur.CancelRequested || !approvalHolds(cur) {
				continue
			}
			if cur.PushedStoreID != storeID {
				cur.PushedStoreID = storeID
				if err := tx.UpdateAction(ctx, cur); err != nil {
					return err
				}
			}
			out = append(out, cur)
		}
		return nil
	})
	return out, err
}

// settleCancel decides a cancel requested while the action was
// PENDING_SCHEDULE. The action is never pushed again. Never pushed: it is
// cancelled in the core. Pushed to this agent database: only the agent knows
// whether the push arrived; if it has the action, its record is adopted and
// the cancel forwarded (sendCancels); if it answers 404, the action is
// cancelled in the core.
func (o *Orchestrator) settleCancel(ctx context.Context, ag *client.Agent, res *nodeResult, r *store.Record, log *slog.Logger) {
	id := r.ID
	if r.PushedStoreID == "" {
		res.ops = append(res.ops, op{kind: opCancelled, id: id})
		return
	}
	a, err := call(ctx, o.cfg.AgentTimeout, func(ctx context.Context) (*action.Action, error) { return ag.Get(ctx, id) })
	switch {
	case err == nil:
		res.ops = append(res.ops, op{kind: opAgent, id: id, rec: a})
	case client.StatusOf(err) == http.StatusNotFound:
		res.ops = append(res.ops, op{kind: opCancelled, id: id})
	default:
		log.Debug("look-up for a cancel failed; retried next pass", "action", id, "err", err)
	}
}

// sendCancels sends the cancel requests for actions the agent still holds
// unfinished: those with CancelRequested, and the strays: actions the core
// holds CANCELLED that an earlier pass found NEW or RUNNING on the agent
// (cancelled in the core while their push was on its way).
func (o *Orchestrator) sendCancels(ctx context.Context, ag *client.Agent, res *nodeResult, pulled map[string]*action.Action, log *slog.Logger) {
	agentState := func(r *store.Record) action.State {
		for i := len(res.ops) - 1; i >= 0; i-- {
			if res.ops[i].id == r.ID && res.ops[i].kind == opAgent {
				return res.ops[i].rec.State
			}
		}
		return r.State
	}
	var ids []string
	for i := range res.open {
		r := &res.open[i]
		if s := agentState(r); r.CancelRequested && (s == action.New || s == action.Running) {
			ids = append(ids, r.ID)
		}
	}
	for _, id := range res.stray {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		a, err := call(ctx, o.cfg.AgentTimeout, func(ctx context.Context) (*action.Action, error) { return ag.Cancel(ctx, id) })
		switch {
		case err == nil:
			res.cancels++
			res.settled = append(res.settled, id)
			if a != nil && a.ID == id {
				res.ops = append(res.ops, op{kind: opAgent, id: id, rec: a})
			}
		case client.StatusOf(err) == http.StatusConflict || client.StatusOf(err) == http.StatusNotFound:
			// Already final on the agent, or not there: nothing to cancel.
			res.settled = append(res.settled, id)
		default:
			log.Debug("cancel failed; retried next pass", "action", id, "err", err)
		}
	}
}

// writePlan is everything a pass must write, in order.
type writePlan struct {
	records map[string]*change
	order   []string
	nodes   []store.Node
	cluster *store.Cluster
	events  []store.Event
}

func (w *writePlan) empty() bool {
	return len(w.order) == 0 && len(w.nodes) == 0 && w.cluster == nil && len(w.events) == 0
}

func (w *writePlan) changes() int {
	n := len(w.order) + len(w.nodes)
	if w.cluster != nil {
		n++
	}
	return n
}

// record returns the record as this plan has it so far, or as stored.
func (w *writePlan) record(ctx context.Context, r store.Reader, id string) (*store.Record, error) {
	if c, ok := w.records[id]; ok {
		rec := c.rec
		return &rec, nil
	}
	rec, err := r.Action(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return rec, err
}

// add merges a change into the plan.
func (w *writePlan) add(c *change) {
	if prev, ok := w.records[c.rec.ID]; ok {
		prev.rec = c.rec
		prev.history = append(prev.history, c.history...)
		prev.lost = prev.lost || c.lost
	} else {
		w.records[c.rec.ID] = c
		w.order = append(w.order, c.rec.ID)
	}
	w.events = append(w.events, c.events...)
}

// plan computes, against what r reads, every write the results of a pass
// call for. It is run once on a snapshot (to find out whether anything is to
// be written at all) and again inside the write transaction.
func (o *Orchestrator) plan(ctx context.Context, r store.Reader, cs *clusterState, results []nodeResult, now time.Time) (*writePlan, error) {
	w := &writePlan{records: map[string]*change{}}
	lost := 0
	var down []string
	stored, err := r.Nodes(ctx, cs.id) // one query, not one per node
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*store.Node, len(stored))
	for i := range stored {
		nodes[stored[i].ID] = &stored[i]
	}
	for i := range results {
		res := &results[i]
		node := &res.node
		for _, op := range res.ops {
			cur, err := w.record(ctx, r, op.id)
			if err != nil {
				return nil, err
			}
			if cur != nil && (cur.ClusterID != node.ClusterID || cur.NodeID != node.ID) {
				o.log.Warn("agent reports an action the core has on another node; ignored",
					"cluster", node.ClusterID, "node", node.ID, "action", op.id,
					"core_cluster", cur.ClusterID, "core_node", cur.NodeID)
				continue
			}
			var c *change
			switch op.kind {
			case opAgent:
				if cur == nil {
					c = importAgent(op.rec, node, now)
					break
				}
				if cur.State == action.Cancelled && (op.rec.State == action.New || op.rec.State == action.Running) {
					cs.strays[op.id] = node.ID // the next pass cancels it on the agent
				}
				var ok bool
				if c, ok = adoptAgent(cur, op.rec, node, now); !ok {
					o.log.Warn("agent state cannot follow the core's; kept the core's",
						"cluster", node.ClusterID, "node", node.ID, "action", op.id,
						"core_state", cur.State, "agent_state", op.rec.State)
				}
			case opGone, opLost:
				if cur != nil && (op.kind == opGone || (cur.SeenOnAgent && cur.State.OnAgent())) {
					c = markLost(cur, op.msg, now)
				}
			case opRefused:
				if cur != nil {
					c = markRefused(cur, node, op.msg, now)
				}
			case opReapprove:
				if cur != nil {
					c = markReapprove(cur, now)
				}
			case opCancelled:
				if cur != nil && cur.State == action.PendingSchedule && cur.CancelRequested {
					c = coreMove(cur, action.Cancelled, ActorCore, action.ReasonCancelled, now)
				}
			case opUnconfirmed:
				if cur != nil && cur.State == action.PendingSchedule && cur.PushedStoreID != "" && cur.PushedStoreID != res.storeID {
					c = markLost(cur, op.msg, now)
				}
			}
			if c != nil {
				w.add(c)
				if c.lost {
					lost++
				}
			}
		}

		fresh, ok := nodes[node.ID]
		if !ok {
			continue // removed by discovery meanwhile
		}
		if res.held || store.DownByDiscovery(fresh) {
			// Discovery's word stands (it may have come during the pass):
			// the node is written by discovery alone until it is seen again.
			if fresh.Status == store.NodeDown {
				down = append(down, node.ID)
			}
			continue
		}
		next := *fresh
		next.Status, next.StatusReason = res.status, res.reason
		if res.status == store.NodeUp {
			kinds := slices.Clone(res.info.Kinds)
			sort.Strings(kinds)
			next.StoreID, next.Cursor, next.Kinds, next.Version = res.storeID, res.cursor, kinds, res.info.Version
		} else {
			down = append(down, node.ID)
		}
		if !sameNode(fresh, &next) {
			if t, ok := cs.lastContact[node.ID]; ok {
				next.LastContact = &t
			}
			next.UpdatedTS = now
			w.nodes = append(w.nodes, next)
			if fresh.Status != next.Status {
				typ := store.EventNodeUp
				msg := fmt.Sprintf("node %s is up", node.ID)
				if next.Status == store.NodeDown {
					typ, msg = store.EventNodeDown, fmt.Sprintf("node %s is down: %s", node.ID, next.StatusReason)
				}
				w.events = append(w.events, store.Event{Type: typ, Actor: ActorCore, ClusterID: node.ClusterID,
					NodeID: node.ID, Message: msg, Data: map[string]any{"reason": next.StatusReason}})
			}
		}
	}

	cluster, err := r.Cluster(ctx, cs.id)
	if errors.Is(err, store.ErrNotFound) {
		return w, nil
	} else if err != nil {
		return nil, err
	}
	next := *cluster
	next.Status, next.StatusReason = store.ClusterHealthy, ""
	var why []string
	if len(down) > 0 {
		sort.Strings(down)
		why = append(why, "down: "+strings.Join(down, ", "))
	}
	if lost > 0 {
		why = append(why, fmt.Sprintf("%d action(s) lost", lost))
	}
	if len(why) > 0 {
		next.Status, next.StatusReason = store.ClusterAlert, strings.Join(why, "; ")
	}
	if next.Status != cluster.Status || next.StatusReason != cluster.StatusReason {
		next.UpdatedTS = now
		w.cluster = &next
		if next.Status != cluster.Status {
			typ, msg := store.EventClusterHealthy, fmt.Sprintf("cluster %s is healthy", cs.id)
			if next.Status == store.ClusterAlert {
				typ, msg = store.EventClusterAlert, fmt.Sprintf("cluster %s: %s", cs.id, next.StatusReason)
			}
			w.events = append(w.events, store.Event{Type: typ, Actor: ActorCore, ClusterID: cs.id, Message: msg,
				Data: map[string]any{"reason": next.StatusReason}})
		}
	}
	return w, nil
}

func sameNode(a, b *store.Node) bool {
	return a.Status == b.Status && a.StatusReason == b.StatusReason && a.StoreID == b.StoreID &&
		a.Cursor == b.Cursor && slices.Equal(a.Kinds, b.Kinds) && a.Version == b.Version &&
		a.Addr == b.Addr && a.Source == b.Source
}

// apply writes the plan in tx.
func (w *writePlan) apply(ctx context.Context, tx store.Tx) error {
	for _, id := range w.order {
		c := w.records[id]
		var err error
		if c.insert {
			err = tx.InsertAction(ctx, &c.rec)
		} else {
			err = tx.UpdateAction(ctx, &c.rec)
		}
		if err != nil {
			return err
		}
		for _, h := range c.history {
			if err := tx.AppendHistory(ctx, id, h); err != nil {
				return err
			}
		}
	}
	for i := range w.nodes {
		if err := tx.PutNode(ctx, &w.nodes[i]); err != nil {
			return err
		}
	}
	if w.cluster != nil {
		if err := tx.PutCluster(ctx, w.cluster); err != nil {
			return err
		}
	}
	for i := range w.events {
		if err := tx.AppendEvent(ctx, &w.events[i]); err != nil {
			return err
		}
	}
	return nil
}
