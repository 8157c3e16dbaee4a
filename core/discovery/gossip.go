package discovery

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/names"
)

// GossipSource is the gossip pool's view of the nodes: its Handle method is
// the gossip service's handler, and it reports every agent it has heard of
// since the core started, alive or gone.
//
// Anyone holding the pool's key can announce anything, so the source trusts
// an announcement only as far as it can check it (docs/security.md, "Threat
// model"): API addresses on loopback or link-local are ignored unless
// AllowLoopback, and with VerifyClaims, when several members claim one node
// at different addresses, the address whose agent proves the node's
// identity wins and the others are refused claims, not an outage.
type GossipSource struct {
	log           *slog.Logger
	ch            chan struct{}
	allowLoopback bool
	verify        VerifyFunc
	revoked       RevokedFunc
	now           func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	seq     int
	members map[string]member // by member name
	claims  map[claim]*claimCheck
}

// VerifyFunc checks that the agent answering at addr proves it is nodeID of
// clusterID (with agents_tls: a TLS handshake whose certificate names the
// node). It returns a *ClaimError when the answer is a refusal; any other
// error (the address did not answer) is not remembered.
type VerifyFunc func(ctx context.Context, clusterID, nodeID, addr string) error

// ClaimError is a verification that failed: the agent at the address
// answered, and it is not the node.
type ClaimError struct{ Reason string }

func (e *ClaimError) Error() string { return e.Reason }

// GossipOption tunes a GossipSource.
type GossipOption func(*GossipSource)

// AllowLoopback accepts agents announcing an API address on loopback,
// link-local or the unspecified address. Without it such announcements are
// ignored, so that a key holder cannot point the core at its own host's
// services (SSRF). The core sets it when its own API is on loopback (a pool
// on one machine) or with gossip.insecure.
func AllowLoopback() GossipOption { return func(g *GossipSource) { g.allowLoopback = true } }

// VerifyClaims makes the source check, with fn, every address of a node
// that more than one live member claims.
func VerifyClaims(fn VerifyFunc) GossipOption { return func(g *GossipSource) { g.verify = fn } }

// RevokedFunc reports whether a node's certificate is revoked, and why. It
// must not block.
type RevokedFunc func(clusterID, nodeID string) (reason string, revoked bool)

// RefuseRevoked makes the source refuse every claim of a node whose
// certificate is revoked (core/enroll): the node is DOWN with cause
// store.CauseRevoked and each claim is reported once by Claims. Call
// Recheck when the revocation list changes.
func RefuseRevoked(fn RevokedFunc) GossipOption { return func(g *GossipSource) { g.revoked = fn } }

// Recheck forgets every verified and refused claim and asks for a sync, so
// that claims are judged again (after the revocation list changed).
func (g *GossipSource) Recheck() {
	g.mu.Lock()
	g.claims = map[claim]*claimCheck{}
	g.mu.Unlock()
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

// member is one agent process in the pool.
type member struct {
	name  string
	meta  gossip.Meta
	addr  string // gossip address
	gone  string // "" alive, or store.CauseLeft / store.CauseFailed
	order int    // when it was last seen joining: the earlier claim wins a duplicate
}

// claim is one member's announcement of one node at one API address.
type claim struct{ member, cluster, node, api string }

// claimCheck is what the verification of a claim found.
type claimCheck struct {
	err      string // "" verified
	reported bool   // a refused claim was handed to Sync once
	// retry, when set, marks an address that did not answer: the claim is
	// neither verified nor refused, and is tried again after this time.
	retry time.Time
}

// retryUnanswered is how long a claim whose address did not answer waits
// before it is verified again, so that an unanswering address does not
// slow every sync down by a timeout.
const retryUnanswered = 30 * time.Second

// Claim is an announcement of a node at an address that failed
// verification: Sync records it as a node.claim_refused event.
type Claim struct {
	ClusterID, NodeID string
	Addr              string // the API address claimed
	Member            string // the gossip member that claimed it
	Reason            string
}

var (
	_ Source   = (*GossipSource)(nil)
	_ Partial  = (*GossipSource)(nil)
	_ Claimant = (*GossipSource)(nil)
)

// NewGossipSource returns an empty source.
func NewGossipSource(log *slog.Logger, opts ...GossipOption) *GossipSource {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &GossipSource{log: log, ch: make(chan struct{}, 1), members: map[string]member{}, claims: map[claim]*claimCheck{},
		now: time.Now}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Name is store.SourceGossip.
func (g *GossipSource) Name() string { return store.SourceGossip }

// Partial is true: the pool only knows who it has heard from.
func (g *GossipSource) Partial() bool { return true }

// Changes receives a value after every event that may change the snapshot.
func (g *GossipSource) Changes() <-chan struct{} { return g.ch }

// Handle records one membership event. Members other than agents, and
// agents whose cluster or node id is not a valid name, are ignored.
func (g *GossipSource) Handle(ev gossip.Event) {
	m := ev.Meta
	if m.Role != gossip.RoleAgent {
		return
	}
	if names.CheckID(m.Cluster) != nil || names.CheckID(m.Node) != nil || gossip.ValidateAPIAddr(m.API) != nil {
		g.log.Warn("gossip: agent with an invalid announcement ignored", "member", ev.Name, "addr", ev.Addr,
			"cluster", m.Cluster, "node", m.Node, "api", m.API)
		return
	}
	if !g.allowLoopback && gossip.InternalAddr(m.API) {
		g.log.Warn("gossip: agent announcing a loopback or link-local API address ignored (the core is not on loopback; gossip.insecure allows it)",
			"member", ev.Name, "addr", ev.Addr, "cluster", m.Cluster, "node", m.Node, "api", m.API)
		return
	}
	g.mu.Lock()
	cur, known := g.members[ev.Name]
	switch ev.Kind {
	case gossip.KindJoin, gossip.KindUpdate:
		if !known || cur.gone != "" || ev.Kind == gossip.KindJoin {
			g.seq++
			cur.order = g.seq
		}
		if ev.Kind == gossip.KindJoin || !sameMeta(cur.meta, m) {
			g.forgetClaims(ev.Name) // a new process or announcement is checked again
		}
		cur.name, cur.meta, cur.addr, cur.gone = ev.Name, m, ev.Addr, ""
		// Forget gone members that announced the same node under another
		// name: this one replaces them.
		for name, o := range g.members {
			if name != ev.Name && o.gone != "" && o.meta.Cluster == m.Cluster && o.meta.Node == m.Node {
				delete(g.members, name)
				g.forgetClaims(name)
			}
		}
	case gossip.KindLeave, gossip.KindFail:
		if !known {
			g.mu.Unlock()
			return
		}
		cur.gone = store.CauseFailed
		g.forgetClaims(ev.Name)
		if ev.Kind == gossip.KindLeave {
			cur.gone = store.CauseLeft
		}
	default:
		g.mu.Unlock()
		return
	}
	g.members[ev.Name] = cur
	g.mu.Unlock()
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

// Snapshot returns one Node per announced (cluster, node): alive at the
// address it announced; DOWN with the reason it went when no member
// announcing it is alive; DOWN as a duplicate when two live members announce
// it at different addresses (the address stays the one announced first).
//
// With VerifyClaims, the addresses of such a duplicate are verified first
// (each claim once): when exactly one verifies, it is the node's address,
// the node is not DOWN, and each refused claim is reported once by Claims.
// When none or several verify, the node is DOWN as a duplicate.
func (g *GossipSource) Snapshot() []Node {
	g.mu.Lock()
	byNode := map[key][]member{}
	for _, m := range g.members {
		k := key{m.meta.Cluster, m.meta.Node}
		byNode[k] = append(byNode[k], m)
	}
	g.mu.Unlock()
	out := make([]Node, 0, len(byNode))
	for k, ms := range byNode {
		sort.Slice(ms, func(i, j int) bool { return ms[i].order < ms[j].order })
		var alive []member
		for _, m := range ms {
			if m.gone == "" {
				alive = append(alive, m)
			}
		}
		n := Node{ClusterID: k.cluster, ID: k.node, Source: store.SourceGossip}
		reason, revoked := "", false
		if g.revoked != nil && len(alive) > 0 {
			reason, revoked = g.revoked(k.cluster, k.node)
		}
		switch {
		case revoked:
			n.Addr, n.Labels = alive[0].meta.API, maps.Clone(alive[0].meta.Labels)
			n.Down, n.Detail = store.CauseRevoked, reason
			g.refuseAll(alive, "its certificate is revoked ("+reason+")")
		case len(alive) == 0:
			last := ms[len(ms)-1]
			n.Addr, n.Down, n.Labels = last.meta.API, last.gone, maps.Clone(last.meta.Labels)
		default:
			n.Addr, n.Labels = alive[0].meta.API, maps.Clone(alive[0].meta.Labels)
			addrs := []string{alive[0].meta.API}
			for _, m := range alive[1:] {
				if !contains(addrs, m.meta.API) {
					addrs = append(addrs, m.meta.API)
				}
			}
			if len(addrs) > 1 {
				if won, ok := g.settle(alive); ok {
					n.Addr = won
					break
				}
				n.Down = store.CauseDuplicate
				n.Detail = strings.Join(addrs, " and ")
			}
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ClusterID != out[j].ClusterID {
			return out[i].ClusterID < out[j].ClusterID
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// settle verifies the claims of live members announcing one node at
// different addresses (those not verified yet) and returns the address
// that alone verifies. Without VerifyClaims it settles nothing.
func (g *GossipSource) settle(alive []member) (string, bool) {
	if g.verify == nil {
		return "", false
	}
	claims := make([]claim, len(alive))
	var todo []int
	g.mu.Lock()
	for i, m := range alive {
		claims[i] = claim{m.name, m.meta.Cluster, m.meta.Node, m.meta.API}
		if cc, ok := g.claims[claims[i]]; !ok || !cc.retry.IsZero() && g.now().After(cc.retry) {
			todo = append(todo, i)
		}
	}
	g.mu.Unlock()
	results := make([]error, len(todo))
	var wg sync.WaitGroup
	for j, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := claims[i]
			results[j] = g.verify(context.Background(), c.cluster, c.node, c.api)
		}()
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for j, i := range todo {
		var ce *ClaimError
		switch err := results[j]; {
		case err == nil:
			g.claims[claims[i]] = &claimCheck{}
		case errors.As(err, &ce):
			g.claims[claims[i]] = &claimCheck{err: ce.Reason}
		default:
			g.claims[claims[i]] = &claimCheck{retry: g.now().Add(retryUnanswered)}
			g.log.Warn("gossip: a claim could not be verified; it is tried again at a later change",
				"member", claims[i].member, "node", claims[i].node, "api", claims[i].api, "err", err)
		}
	}
	var won []string
	for _, c := range claims {
		if cc, ok := g.claims[c]; ok && cc.err == "" && cc.retry.IsZero() && !contains(won, c.api) {
			won = append(won, c.api)
		}
	}
	if len(won) != 1 {
		return "", false
	}
	return won[0], true
}

// Claims hands over, once each, the claims of live members that failed
// verification.
func (g *GossipSource) Claims() []Claim {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Claim
	for c, cc := range g.claims {
		if cc.err == "" || cc.reported {
			continue // verified, unanswered or told
		}
		cc.reported = true
		out = append(out, Claim{ClusterID: c.cluster, NodeID: c.node, Addr: c.api, Member: c.member, Reason: cc.err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	return out
}

// refuseAll records the claims of alive as refused for reason (each
// reported once by Claims).
func (g *GossipSource) refuseAll(alive []member, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range alive {
		c := claim{m.name, m.meta.Cluster, m.meta.Node, m.meta.API}
		if cc, ok := g.claims[c]; !ok || cc.err != reason {
			g.claims[c] = &claimCheck{err: reason}
		}
	}
}

// forgetClaims drops what was verified about the member's claims. g.mu is held.
func (g *GossipSource) forgetClaims(name string) {
	for c := range g.claims {
		if c.member == name {
			delete(g.claims, c)
		}
	}
}

// sameMeta reports whether two announcements say the same.
func sameMeta(a, b gossip.Meta) bool {
	return a.V == b.V && a.Role == b.Role && a.Cluster == b.Cluster && a.Node == b.Node && a.API == b.API &&
		a.Leave == b.Leave && maps.Equal(a.Labels, b.Labels)
}
