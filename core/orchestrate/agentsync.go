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
	"strconv"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/tracing"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// This file is the conversation with one agent: info, pull, push, cancels.
// It decides nothing about the core's records: what the agent says becomes
// ops of a nodeResult, which plan.go turns into writes. The one write made
// here, on purpose, is markPushed: before a push is sent, which agent
// database it goes to is committed (see pushPending).

// Reasons a node is DOWN after a sync.
const (
	ReasonIdentityMismatch = "identity mismatch"
	ReasonUnreachable      = "unreachable"
	// ReasonRevoked: the agent presented a certificate on the revocation list.
	ReasonRevoked = "tls: the agent's certificate is revoked"
	// ReasonTooLarge: an answer passed the client's limit, or the info its
	// bounds (shared/client, shared/wire); nothing past the limit was read.
	ReasonTooLarge = "the agent's answer is over a size limit"
	// ReasonInternalAddr: a gossip node's address is loopback or
	// link-local, which the core refuses to dial (RefuseInternalGossip).
	ReasonInternalAddr = "refused: a gossip address on loopback or link-local"
)

// opKind is what a node sync learnt about one action.
type opKind int

const (
	opAgent       opKind = iota // the agent's record (pull, push or cancel answer)
	opGone                      // the agent answered 410 to a push
	opRefused                   // the agent answered 422 to a push
	opReapprove                 // the content no longer matches its approval
	opLost                      // a full listing lacks an action the agent held
	opCancelled                 // a cancel-requested action the agent does not hold
	opUnconfirmed               // pushed to an agent database since replaced, without an answer
	opHeld                      // held back by the disruption budget (msg: the reason)
)

type op struct {
	kind opKind
	id   string
	rec  *action.Action
	msg  string
}

// nodeResult is what syncing one node learnt, before anything is written.
type nodeResult struct {
	node    store.Node   // as read before the agent was talked to
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
	// held: discovery held the node DOWN, so the sync did not contact it.
	held bool
	// pausedRuns are the runs, among those of the open actions, that hold
	// their children not yet sent (runs.PausedRuns; shared by all nodes).
	pausedRuns map[string]bool
	// job is the sync of the cluster's loop this node is part of; seq its
	// place in the loop's dispatch order.
	job *job
	seq uint64
	// claim, for a full sync's node, says whether a worker talks to it or a
	// nudged sync took it (queued, talking, taken).
	claim *atomic.Int32
	// labels: the node's labels, the configured ones with the agent's laid
	// over them (set when the agent answered).
	labels map[string]string
	// schemasRefused: why the core refuses args schemas the agent announced,
	// by kind, when they differ from the node's as read (compiled here,
	// outside any transaction; actions.RefusedSchemas).
	schemasRefused map[string]string
	// budget is the disruption budget of the sync, shared by its nodes (nil
	// without a budget).
	budget *budgetView
	// gate holds what waits for its not_before, or for the cluster's
	// window or the end of its freeze (gate.go); shared by the sync's nodes.
	gate *pushGate
	// askCounter: the full sync asks the agent's change counter first, and
	// leaves the node as stored (quiet) when it is seen, the one the loop
	// last committed (spread.go).
	askCounter, quiet bool
	seen              wire.ChangeCounter
	// listAll: the sync lists every record of the agent and compares id
	// sets (a full sync's turn of the node that compares, fullsync.go).
	listAll bool
	// acked is the cursor the core last acknowledged to the node's agent
	// (set by the loop before the sync), ackSent the one this sync
	// acknowledged, if any (kept by the loop at the commit).
	acked, ackSent ackMark
}

// ackMark is a cursor acknowledged to an agent's database.
type ackMark struct {
	storeID string
	cursor  int64
}

// downReason turns an agent error into a status reason that stays the same
// from one sync to the next while the cause does (so it is not rewritten).
func downReason(err error) string {
	var (
		ae  *client.APIError
		ie  *tlsutil.IdentityError
		ce  *tlsutil.ClusterError
		ua  x509.UnknownAuthorityError
		inv x509.CertificateInvalidError
		rh  tls.RecordHeaderError
		al  tls.AlertError
	)
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("agent answered %d %s", ae.Status, http.StatusText(ae.Status))
	case errors.Is(err, client.ErrTooLarge), errors.Is(err, wire.ErrInfoOutOfBounds):
		return ReasonTooLarge
	case errors.Is(err, gossip.ErrInternalAddr):
		return ReasonInternalAddr
	case errors.As(err, &ie):
		return fmt.Sprintf("%s: the certificate at this address is %s", ReasonIdentityMismatch, ie.Got)
	case errors.As(err, &ce):
		return fmt.Sprintf("%s: %s", ReasonIdentityMismatch, ce.Error())
	case errors.Is(err, tlsutil.ErrRevoked):
		return ReasonRevoked
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

// syncNode talks to one agent: info, pull, push, cancels. What it learns
// goes into res; the only store write is markPushed's.
func (o *Orchestrator) syncNode(ctx context.Context, res *nodeResult, full bool) {
	n := &res.node
	log := o.log.With("cluster", n.ClusterID, "node", n.ID)
	res.storeID, res.cursor = n.StoreID, n.Cursor
	ag := client.NewAgent(o.agentURL(n.Addr), res.hc)

	info, err := call(ctx, o.cfg.AgentTimeout, ag.Info)
	if err != nil {
		res.budget.observe(n.ID, true, nil)
		res.status, res.reason = store.NodeDown, downReason(err)
		log.Debug("agent info failed", "err", err)
		return
	}
	if info.NodeID != n.ID || info.ClusterID != n.ClusterID {
		res.budget.observe(n.ID, true, nil)
		res.status, res.reason = store.NodeDown, ReasonIdentityMismatch
		log.Warn("agent identity mismatch", "addr", n.Addr, "agent_node", info.NodeID, "agent_cluster", info.ClusterID)
		return
	}
	if err := labels.Set(info.Labels).Validate(); err != nil {
		// Labels are bounded as in the gossip metadata: beyond, the
		// agent's are not taken (the configured ones stay).
		log.Warn("agent labels refused", "err", err)
		info.Labels = nil
	}

	// Pull. A new store id means the agent's database was replaced: list
	// everything and compare id sets. So does every CompareIDsEvery-th full sync.
	storeChanged := n.StoreID != "" && n.StoreID != info.StoreID
	if storeChanged {
		log.Warn("agent database replaced: full listing", "old_store_id", n.StoreID, "store_id", info.StoreID)
	}
	listAll := full || storeChanged || n.StoreID == ""
	// The committed cursor is acknowledged once: an idle sync is then two
	// requests, info and one page of changes.
	mark := ackMark{storeID: n.StoreID, cursor: n.Cursor}
	since, ack := n.Cursor, res.acked != mark
	if listAll {
		since, ack = 0, false
	}
	pullStart := time.Now()
	pulled, order, since, err := o.pull(ctx, ag, since, ack)
	if !listAll {
		o.tracePull(pulled, n, pullStart)
	}
	if ack && (err == nil || len(order) > 0) {
		res.ackSent = mark // the acknowledgement went before the first page
	}
	res.pulled += len(order)
	if err != nil {
		res.budget.observe(n.ID, true, nil)
		res.status, res.reason = store.NodeDown, downReason(err)
		log.Debug("agent pull failed", "err", err)
		res.ops = pulledOps(order, pulled) // what came is still the agent's word
		return
	}
	res.status, res.reason, res.info = store.NodeUp, "", info
	res.storeID, res.cursor = info.StoreID, since
	res.labels = o.nodeLabels(n.ClusterID, n.ID, info.Labels)
	if !sameSchemas(n.ArgsSchemas, info.ArgsSchemas) {
		res.schemasRefused = actions.RefusedSchemas(info.ArgsSchemas)
	}
	res.ops = pulledOps(order, pulled)
	res.budget.observe(n.ID, false, pulled)

	if listAll {
		for _, r := range res.open {
			if actions.MissingIsLost(&r) && pulled[r.ID] == nil {
				res.ops = append(res.ops, op{kind: opLost, id: r.ID, msg: actions.ReasonMissing})
			}
		}
	}
	// An action pushed to a database the agent no longer has, whose answer
	// never came back, may have run there: it is LOST, never pushed again.
	for _, r := range res.open {
		if actions.UnconfirmedIsLost(&r, info.StoreID) && pulled[r.ID] == nil {
			res.ops = append(res.ops, op{kind: opUnconfirmed, id: r.ID, msg: actions.ReasonUnconfirmed})
		}
	}

	o.pushPending(ctx, ag, res, pulled, log)
	o.sendCancels(ctx, ag, res, log)

	// What the agent accepted bumped its change sequence: pull once more so
	// that the cursor committed by this sync covers it, and the next sync
	// finds nothing new.
	if res.pushed > 0 || res.cancels > 0 {
		pullStart := time.Now()
		more, order, next, err := o.pull(ctx, ag, res.cursor, false)
		o.tracePull(more, n, pullStart)
		if err != nil {
			log.Debug("agent pull after push failed", "err", err)
			return
		}
		res.pulled += len(order)
		res.ops = append(res.ops, pulledOps(order, more)...)
		res.cursor = next
		res.budget.observe(n.ID, false, more)
	}
}

// nodeLabels lays an agent's own labels over the configured ones of its
// node, key by key; nil when there are none.
func (o *Orchestrator) nodeLabels(clusterID, nodeID string, own map[string]string) map[string]string {
	static := o.cfg.StaticLabels[clusterID][nodeID]
	if len(static)+len(own) == 0 {
		return nil
	}
	return labels.Merge(static, own)
}

// pull lists the agent's changes after since, page by page. Only the first
// request carries ack: the caller acknowledges the cursor committed by the
// previous sync, never one it has not stored yet. On error it returns what
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

// pushPending sends the node's PENDING_SCHEDULE actions in creation order,
// as many as the agent's queue has room for.
//
// Before anything is sent, markPushed commits, in its own transaction and
// apart from the sync's commit, which agent database the pushes go to. This
// is on purpose: if the core dies after sending and before the sync
// commits, the mark tells the next sync that the push may have arrived (the
// action is then only settled by the agent's word, never cancelled or
// pushed blindly), and an API cancel that commits first wins (markPushed
// sends nothing cancelled).
func (o *Orchestrator) pushPending(ctx context.Context, ag *client.Agent, res *nodeResult, pulled map[string]*action.Action, log *slog.Logger) {
	// A drained node gets no new pushes; what the agent holds finishes.
	room := o.cfg.MaxQueuedPerNode - res.info.Queue[action.New] - res.info.Queue[action.Running]
	var batch []*store.Record
	for i := range res.open {
		r := &res.open[i]
		if r.State != action.PendingSchedule || pulled[r.ID] != nil {
			continue
		}
		if actions.UnconfirmedIsLost(r, res.info.StoreID) {
			continue // LOST by this sync (opUnconfirmed)
		}
		if r.CancelRequested {
			o.settleCancel(ctx, ag, res, r, log)
			continue
		}
		if runs.HoldsChild(res.pausedRuns, r) {
			continue // its run is paused: it goes when the run resumes
		}
		if !actions.ApprovalHolds(r) {
			res.ops = append(res.ops, op{kind: opReapprove, id: r.ID})
			continue
		}
		if res.node.Drained {
			// Held while the node is drained, and it says so.
			if r.StateReason != actions.ReasonDrained {
				res.ops = append(res.ops, op{kind: opHeld, id: r.ID, msg: actions.ReasonDrained})
			}
			continue
		}
		// Its not_before, the cluster's windows and freezes (gate.go): a
		// held action waits, a wake-up is armed for when it may go, and
		// the node's later actions are not held back by it.
		if why, until := res.gate.holds(r, time.Now()); why != "" {
			if r.StateReason != why {
				res.ops = append(res.ops, op{kind: opHeld, id: r.ID, msg: why})
			}
			o.wakeups.at(res.node.ClusterID, res.node.ID, until)
			continue
		}
		if room <= 0 {
			break
		}
		// The disruption budget (budget.go): a held action waits, and so
		// do the node's later ones (creation order is push order).
		if ok, why := res.budget.admit(res.node.ID, r); !ok {
			if r.StateReason != why {
				res.ops = append(res.ops, op{kind: opHeld, id: r.ID, msg: why})
			}
			break
		}
		batch = append(batch, r)
		room--
	}
	if len(batch) == 0 {
		return
	}
	admitted := batch
	batch, err := o.markPushed(ctx, res.node.ClusterID, res.node.ID, batch, res.info.StoreID)
	for _, r := range admitted {
		if err != nil || !slices.ContainsFunc(batch, func(b *store.Record) bool { return b.ID == r.ID }) {
			res.budget.release(r.ID) // not sent: cancelled, changed or drained meanwhile
		}
	}
	if err != nil {
		log.Warn("record pushes; none sent this sync", "err", err)
		return
	}
	// The actions this sync marked: one held at its push is then known
	// never sent, and its mark is taken back.
	fresh := map[string]bool{}
	for _, r := range admitted {
		if r.PushedStoreID == "" {
			fresh[r.ID] = true
		}
	}
	// A run's child says where it belongs in its run to an agent that
	// keeps it; one of an earlier release would refuse the fields.
	placed := slices.Contains(res.info.PushFields, "run_id")
	traced := o.cfg.Tracer != nil && slices.Contains(res.info.PushFields, "traceparent")
	for i, r := range batch {
		// Pushes to one node go one after another, each allowed up to
		// AgentTimeout: ask the cluster's calendar as it is now (a window
		// may have closed, a freeze begun or been added by a reload) right
		// before each push. One held now is not sent, as one whose push
		// failed: it waits, and goes when it may.
		if why, until := res.gate.again(o.cfg.Calendars.Load().Of(res.node.ClusterID), r, time.Now()); why != "" {
			o.wakeups.at(res.node.ClusterID, res.node.ID, until)
			log.Debug("held at its push", "action", r.ID, "why", why)
			o.unmarkUnsent(ctx, res, batch[i:], fresh, log)
			return
		}
		req := &wire.PushRequest{ID: r.ID, Kind: r.Kind, Args: r.Args, TimeoutS: r.TimeoutS,
			CreatedTS: &r.CreatedTS, Origin: r.Origin, Requester: r.Requester, ApprovedBy: r.ApprovedBy,
			ClusterID: r.ClusterID, NodeID: r.NodeID}
		if placed {
			req.RunID, req.Stage, req.Step, req.Wave, req.Attempt = r.RunID, r.Stage, r.Step, r.Wave, r.Attempt
		}
		if traced {
			req.Traceparent = o.cfg.Tracer.Traceparent(tracing.Subject{RunID: r.RunID, ActionID: r.ID})
		}
		ctx, cancel := context.WithTimeout(ctx, o.cfg.AgentTimeout)
		pushStart := time.Now()
		a, status, err := ag.Push(ctx, req)
		cancel()
		o.tracePush(&r.Action, pushStart, status, err)
		switch {
		case err == nil:
			res.ops = append(res.ops, op{kind: opAgent, id: r.ID, rec: a})
			res.pushed++
			o.metrics.pushes.WithLabelValues(strconv.Itoa(status)).Inc()
		case errors.Is(err, client.ErrGone):
			res.budget.release(r.ID)
			res.ops = append(res.ops, op{kind: opGone, id: r.ID, msg: actions.ReasonGone})
			o.metrics.pushes.WithLabelValues("410").Inc()
		case errors.Is(err, client.ErrRefused):
			msg := client.MessageOf(err)
			if msg == "" {
				msg = "refused by the agent"
			}
			res.budget.release(r.ID)
			res.ops = append(res.ops, op{kind: opRefused, id: r.ID, msg: msg})
			o.metrics.pushes.WithLabelValues("422").Inc()
		case !client.Answered(err):
			// The request may not have arrived: the action stays
			// PENDING_SCHEDULE and is sent again, with the same id, next sync.
			o.metrics.pushes.WithLabelValues("error").Inc()
			log.Debug("push failed; retried next sync", "action", r.ID, "err", err)
			return
		default:
			// Any other answer (a 5xx, a proxy's 502) may hide a delivery:
			// stop here so that no later action overtakes this one.
			o.metrics.pushes.WithLabelValues(strconv.Itoa(client.StatusOf(err))).Inc()
			log.Warn("push refused; retried next sync", "action", r.ID, "err", err)
			return
		}
	}
}

// unmarkUnsent takes back the push mark of the actions of unsent that this
// sync marked (fresh) and releases their budget: they were never sent.
func (o *Orchestrator) unmarkUnsent(ctx context.Context, res *nodeResult, unsent []*store.Record, fresh map[string]bool, log *slog.Logger) {
	err := o.st.Update(ctx, func(tx store.Tx) error {
		for _, r := range unsent {
			if fresh[r.ID] {
				if err := actions.UnmarkSending(ctx, tx, r.ID, res.info.StoreID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		log.Warn("take back push marks", "err", err)
		return
	}
	for _, r := range unsent {
		if fresh[r.ID] {
			res.budget.release(r.ID)
		}
	}
}

// markPushed commits, in one transaction of its own, the agent database
// storeID on every record of batch that may still be sent
// (actions.MarkSending), and returns those; none when the node was drained
// meanwhile.
func (o *Orchestrator) markPushed(ctx context.Context, clusterID, nodeID string, batch []*store.Record, storeID string) ([]*store.Record, error) {
	var out []*store.Record
	err := o.st.Update(ctx, func(tx store.Tx) error {
		out = out[:0]
		if n, err := tx.Node(ctx, clusterID, nodeID); errors.Is(err, store.ErrNotFound) {
			return nil // forgotten meanwhile
		} else if err != nil || n.Drained {
			return err
		}
		for _, r := range batch {
			cur, send, err := actions.MarkSending(ctx, tx, r.ID, storeID)
			if err != nil {
				return err
			}
			if send {
				out = append(out, cur)
			}
		}
		return nil
	})
	return out, err
}

// settleCancel asks the agent about a cancel requested while the action was
// PENDING_SCHEDULE; the action is never pushed again. Never pushed: it is
// cancelled in the core. Pushed to this agent database: only the agent
// knows whether the push arrived; if it has the action, its record is
// adopted and the cancel sent on (sendCancels); if it answers 404, the
// action is cancelled in the core.
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
	case errors.Is(err, client.ErrNotFound):
		res.ops = append(res.ops, op{kind: opCancelled, id: id})
	default:
		log.Debug("look-up for a cancel failed; retried next sync", "action", id, "err", err)
	}
}

// sendCancels sends a cancel for every cancel-requested action the agent
// holds NEW or RUNNING (as it said in this sync). The request is stored with
// the record (CancelRequested), so it is sent again, after a core restart
// too, until the agent's record is final. That includes a cancel the core
// had decided for an action it only later found on the agent (a rejected
// action someone pushed there directly): actions.Adopt keeps the request
// standing, and the next sync sends it.
func (o *Orchestrator) sendCancels(ctx context.Context, ag *client.Agent, res *nodeResult, log *slog.Logger) {
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
	for _, id := range ids {
		a, err := call(ctx, o.cfg.AgentTimeout, func(ctx context.Context) (*action.Action, error) { return ag.Cancel(ctx, id) })
		switch {
		case err == nil:
			res.cancels++
			if a != nil && a.ID == id {
				res.ops = append(res.ops, op{kind: opAgent, id: id, rec: a})
			}
		case errors.Is(err, client.ErrFinal), errors.Is(err, client.ErrNotFound):
			// Already final on the agent, or not there: nothing to cancel;
			// the agent's record settles it.
		default:
			log.Debug("cancel failed; retried next sync", "action", id, "err", err)
		}
	}
}

// tracePush records the span of one push (docs/architecture.md, "Traces").
func (o *Orchestrator) tracePush(a *action.Action, start time.Time, status int, err error) {
	o.cfg.Tracer.Push(a, start, time.Now(), status, err)
}

// tracePull records, for each action a pull brought, the span of that
// pull under the action's.
func (o *Orchestrator) tracePull(pulled map[string]*action.Action, n *store.Node, start time.Time) {
	if o.cfg.Tracer == nil {
		return
	}
	end := time.Now()
	for _, a := range pulled {
		o.cfg.Tracer.Pull(a, n.ClusterID, n.ID, start, end)
	}
}
