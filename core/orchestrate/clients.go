package orchestrate

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/tlsutil"
)

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
// connection per node is kept alive between syncs (no bound on the total:
// a fleet of 10,000 keeps 10,000, the reason for LimitNOFILE in the core's
// unit), and at most two are open to a node (a request of the API beside a
// sync) rather than one more per request. A connection idle for three
// intervals is closed. A node whose run child is on its agent (NEW or
// RUNNING) has one more, its run watcher's (watch.go, its own transport).
// With idle > 0, at most idle connections are kept in all (the least
// recently used closed first): a fleet larger than that reconnects to most
// nodes at each sync, a TCP handshake on each side per node sync, in
// exchange for descriptors (configs/core.yaml, agent_idle_conns).
func agentTransport(interval time.Duration, idle int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = idle
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
// loopback) is taken as the node's answer, a status the sync does not
// accept, and is never followed.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

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
	for id := range cs.seen {
		if !in[id] {
			delete(cs.seen, id)
		}
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

// call runs one agent request with the agent timeout.
func call[T any](ctx context.Context, timeout time.Duration, fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}
