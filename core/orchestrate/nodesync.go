package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/tlsutil"
)

// Syncs of single nodes (docs/architecture.md, "Node syncs and reactive
// progress"). An agent's "changed" note, an approval or a new PENDING_SCHEDULE
// action asks for a sync of one node: the same node sync and the same commit as
// a pass, for that node alone, at once, even while a pass of its cluster is
// under way. A node is never synced by two syncs at once (lockNode); the
// cluster's status stays the business of whole passes.

func (cs *clusterState) contact(nodeID string) (time.Time, bool) {
	cs.smu.Lock()
	defer cs.smu.Unlock()
	t, ok := cs.lastContact[nodeID]
	return t, ok
}

// lockNode waits until no other sync talks to the node, or ctx ends, and
// returns the function that lets the next one in.
func (cs *clusterState) lockNode(ctx context.Context, nodeID string) (func(), error) {
	for {
		cs.smu.Lock()
		busy, ok := cs.nodeLocks[nodeID]
		if !ok {
			done := make(chan struct{})
			cs.nodeLocks[nodeID] = done
			cs.smu.Unlock()
			return func() {
				cs.smu.Lock()
				delete(cs.nodeLocks, nodeID)
				cs.smu.Unlock()
				close(done)
			}, nil
		}
		cs.smu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// nodeClient returns the HTTP client of one node (see nodeClients), keeping
// the clients of the cluster's other nodes.
func (o *Orchestrator) nodeClient(cs *clusterState, n *store.Node) *http.Client {
	if o.cfg.AgentTLS == nil {
		return o.hc
	}
	cs.smu.Lock()
	defer cs.smu.Unlock()
	c, ok := cs.clients[n.ID]
	if !ok || c.addr != n.Addr {
		if ok {
			c.hc.CloseIdleConnections()
		}
		var tr *http.Transport
		if base, isTr := o.hc.Transport.(*http.Transport); isTr {
			tr = base.Clone()
		} else {
			tr = http.DefaultTransport.(*http.Transport).Clone()
		}
		tr.TLSClientConfig = tlsutil.ForPeer(o.cfg.AgentTLS, tlsutil.Agent(n.ID))
		c = &nodeClient{addr: n.Addr, hc: &http.Client{Transport: tr}}
		cs.clients[n.ID] = c
	}
	return c.hc
}

// storedNodes reads the stored nodes a commit needs: every node of the
// cluster for a whole pass (one query), or the synced ones.
func storedNodes(ctx context.Context, r store.Reader, clusterID string, results []nodeResult, whole bool) (map[string]*store.Node, error) {
	out := make(map[string]*store.Node, len(results))
	if whole {
		stored, err := r.Nodes(ctx, clusterID)
		if err != nil {
			return nil, err
		}
		for i := range stored {
			out[stored[i].ID] = &stored[i]
		}
		return out, nil
	}
	for i := range results {
		n, err := r.Node(ctx, clusterID, results[i].node.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		out[n.ID] = n
	}
	return out, nil
}

// SyncNodes syncs the named nodes of a cluster as a pass would (info, pull,
// push, cancels) and commits what they taught in one Update, without
// waiting for a pass of the cluster under way. Unknown node ids are
// skipped. It never lists every record of an agent (that is the passes'
// full sync), and never changes the cluster's status.
func (o *Orchestrator) SyncNodes(ctx context.Context, clusterID string, nodeIDs []string) (Report, error) {
	rep, err := o.syncNodes(ctx, clusterID, nodeIDs)
	o.metrics.observeNodeSync(rep, err)
	return rep, err
}

func (o *Orchestrator) syncNodes(ctx context.Context, clusterID string, nodeIDs []string) (Report, error) {
	rep := Report{Cluster: clusterID}
	// A note may name any cluster: keep no state for one the store lacks.
	err := o.st.Read(ctx, func(r store.Reader) error {
		_, err := r.Cluster(ctx, clusterID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return rep, nil
	} else if err != nil {
		return rep, fmt.Errorf("sync of %s nodes: %w", clusterID, err)
	}
	cs := o.cluster(clusterID)
	ids := append([]string(nil), nodeIDs...)
	sort.Strings(ids)
	// Locked in id order, so that two syncs of overlapping sets never wait
	// for each other in a circle; held until the commit.
	var unlock []func()
	defer func() {
		for _, u := range unlock {
			u()
		}
	}()
	for i, id := range ids {
		if i > 0 && ids[i-1] == id {
			continue
		}
		u, err := cs.lockNode(ctx, id)
		if err != nil {
			return rep, err
		}
		unlock = append(unlock, u)
	}

	var nodes []nodeResult
	var bv *budgetView
	readAt := time.Now()
	err = o.st.Read(ctx, func(r store.Reader) error {
		if _, ok := o.cfg.Budget.Limit(clusterID); ok {
			// The budget needs the whole cluster: every node, every open action.
			all, err := r.Nodes(ctx, clusterID)
			if err != nil {
				return err
			}
			open, err := r.OpenActions(ctx, clusterID, "")
			if err != nil {
				return err
			}
			bv = o.newBudgetView(cs, all, open, readAt)
		}
		for i, id := range ids {
			if i > 0 && ids[i-1] == id {
				continue
			}
			n, err := r.Node(ctx, clusterID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			open, err := r.OpenActions(ctx, clusterID, id)
			if err != nil {
				return err
			}
			nodes = append(nodes, nodeResult{node: *n, open: open, budget: bv})
		}
		// The children of runs not RUNNING wait, as in a pass.
		var opens []store.Record
		for i := range nodes {
			opens = append(opens, nodes[i].open...)
		}
		paused, err := pausedRuns(ctx, r, clusterID, opens)
		if err != nil {
			return err
		}
		for i := range nodes {
			nodes[i].pausedRuns = paused
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("sync of %s nodes: %w", clusterID, err)
	}
	var wg sync.WaitGroup
	for i := range nodes {
		res := &nodes[i]
		if store.DownByDiscovery(&res.node) {
			res.held, res.status, res.reason = true, res.node.Status, res.node.StatusReason
			continue
		}
		res.hc = o.nodeClient(cs, &res.node)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.syncNode(ctx, res, false)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := o.commit(ctx, cs, nodes, false, &rep); err != nil {
		return rep, fmt.Errorf("sync of %s nodes: %w", clusterID, err)
	}
	o.nudgeHeld(bv)
	// A child of a run that this sync saw finish may admit the run's next
	// wave: create it now, and ask for the pass that pushes it.
	if rep.Changes > 0 {
		if o.advanceRuns(ctx, clusterID) > 0 {
			o.Nudge(clusterID)
		}
	}
	return rep, nil
}

// NudgeNode asks for a sync of one node soon: at once, or, while a sync of
// that node runs, right after it. It never blocks.
func (o *Orchestrator) NudgeNode(clusterID, nodeID string) {
	o.mu.Lock()
	if o.nodeNudged[clusterID] == nil {
		o.nodeNudged[clusterID] = map[string]bool{}
	}
	o.nodeNudged[clusterID][nodeID] = true
	o.mu.Unlock()
	select {
	case o.nodeWake <- struct{}{}:
	default:
	}
}

// syncNudgedNodes runs the syncs NudgeNode asks for until ctx ends: at most
// one sync per cluster at a time, taking every node nudged meanwhile, and
// at most Workers syncs at once.
func (o *Orchestrator) syncNudgedNodes(ctx context.Context) {
	var syncs sync.WaitGroup
	defer syncs.Wait()
	running := map[string]bool{}
	finished := make(chan string, o.cfg.Workers)
	for {
		o.mu.Lock()
		for clusterID, set := range o.nodeNudged {
			if running[clusterID] || len(running) >= o.cfg.Workers {
				continue
			}
			ids := make([]string, 0, len(set))
			for id := range set {
				ids = append(ids, id)
			}
			delete(o.nodeNudged, clusterID)
			running[clusterID] = true
			syncs.Add(1)
			go func() {
				defer syncs.Done()
				defer func() { finished <- clusterID }()
				// As a pass: only under the cluster's lease, when several
				// replicas share the store.
				pctx, done, ok := o.passContext(ctx, clusterID)
				if !ok {
					return
				}
				rep, err := o.SyncNodes(pctx, clusterID, ids)
				done()
				o.TestSignals.NodesSynced.Send(NodesSynced{Cluster: clusterID, Nodes: ids, Report: rep, Err: err})
				switch {
				case errors.Is(err, store.ErrFenced):
					o.metrics.latePushes.Add(float64(rep.Pushed))
					o.log.Info("node sync refused: the lease was lost", "cluster", clusterID, "pushed", rep.Pushed)
				case err != nil && ctx.Err() == nil:
					o.log.Warn("node sync failed", "cluster", clusterID, "nodes", ids, "err", err)
				case rep.Changes > 0:
					o.log.Debug("node sync", "cluster", clusterID, "nodes", ids, "pushed", rep.Pushed, "changes", rep.Changes)
				}
			}()
		}
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-o.nodeWake:
		case id := <-finished:
			delete(running, id)
		}
	}
}
