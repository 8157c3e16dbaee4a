// Package enroll is how agents join the fleet without hand-made
// certificates (docs/architecture.md, "Installing on a fleet"): join tokens
// (role enroll, a cluster, a TTL and a use count), signing an agent's
// certificate signing request with the core's agent CA, renewal over mutual
// TLS, and the revocation list that the core checks on every connection to
// an agent and every gossip claim.
//
// The key of an agent never leaves its node. Each enrollment, renewal and
// revocation is an event, written in the same transaction as what it
// describes. Refusals are rate-limited (refusals.go): at most one
// node.enroll_refused event a minute per join token and one
// node.renew_refused a minute per certificate, each counting the refusals
// it stands for; callers with no known token or certificate get one log
// line a minute in all.
package enroll

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// DefaultLifetime is how long an agent certificate lasts unless configured.
const DefaultLifetime = 30 * 24 * time.Hour

// MinLifetime is the shortest lifetime accepted (tests use short ones).
const MinLifetime = 10 * time.Second

// RenewalActor is the IssuedBy of a renewed certificate.
const RenewalActor = "renewal"

// Errors of enrollment, matched with errors.Is. Unknown and expired
// tokens, and certificates that do not verify, are auth.ErrUnauthenticated;
// bad signing requests are tlsutil.ErrBadCSR.
var (
	// ErrRefused: the token or certificate is valid but may not do this
	// (another cluster, used up, revoked, not a join token).
	ErrRefused = errors.New("enrollment refused")
	// ErrHeld: the node id is taken: a live certificate holds it, a
	// configured node, or a node known without a certificate from
	// enrollment.
	ErrHeld = errors.New("node id taken")
	// ErrInvalid: a malformed request.
	ErrInvalid = errors.New("invalid enrollment request")
	// ErrDisabled: the core has no agent CA (agents_ca).
	ErrDisabled = errors.New("enrollment is not configured on this core (agents_ca)")
)

// Config is what enrollment needs beyond the store.
type Config struct {
	// CA signs agent certificates; nil disables enrollment (the revocation
	// list still works).
	CA *tlsutil.CA
	// Bundle is the PEM CA bundle given to agents.
	Bundle []byte
	// GossipKey is the pool's base64 key given to agents ("" without).
	GossipKey string
	// Lifetime of a signed certificate (DefaultLifetime when zero).
	Lifetime time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Configured are the nodes of the static list, keyed "cluster/node":
	// true for those marked `enroll: true`, whose id a join token may
	// enroll; false for the others, whose id only an admin's `replace`
	// may take.
	Configured map[string]bool
	// Declared says whether a cluster's membership declares a node
	// (expect: nodes), as it is now; nil: none does.
	Declared func(clusterID, nodeID string) bool
	// HoldLabels, in the enrollment's transaction, gives a node that is
	// stored already the labels of its new join token (next) as labels
	// the core holds for it, instead of those of the join token that
	// enrolled it before (prev); core/nodes.Enrolled. A node not stored
	// yet takes them when it joins (core/discovery). Nil: stored nodes
	// keep the labels they hold until they join again.
	HoldLabels func(ctx context.Context, tx store.Tx, clusterID, nodeID string, prev, next map[string]string) error
}

// RenewalGrace is how long a renewed certificate still authenticates
// after its renewal, so that connections opened with it before the agent
// loads the new one are not refused. It renews nothing more.
const RenewalGrace = time.Minute

// ReasonRenewed is the revocation reason of a certificate its renewal
// retired.
const ReasonRenewed = "renewed"

// Service signs, renews and revokes agent certificates and keeps the
// revocation list in memory, fresh from the store.
type Service struct {
	cfg  Config
	st   store.Store
	log  *slog.Logger
	pool *x509.CertPool

	// revoked: serial → from when it is refused (later than now for a
	// renewed certificate in its grace).
	revoked atomic.Pointer[map[string]time.Time]
	// nodes: "cluster/node" → reason, for nodes whose newest certificate
	// is revoked.
	nodes atomic.Pointer[map[string]string]
	gen   atomic.Uint64

	mu       sync.Mutex
	onChange []func()

	// refusals limits refusal events and log lines (refusals.go).
	refusals *limiter
}

// New builds the service; it starts nothing (Run keeps the list fresh).
func New(cfg Config, st store.Store, log *slog.Logger) *Service {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, st: st, log: log, refusals: newLimiter(refusalEvery, maxRefusalKeys)}
	if cfg.CA != nil {
		s.pool = x509.NewCertPool()
		s.pool.AddCert(cfg.CA.Cert)
	}
	empty, none := map[string]time.Time{}, map[string]string{}
	s.revoked.Store(&empty)
	s.nodes.Store(&none)
	return s
}

// Enabled reports whether the core signs agent certificates.
func (s *Service) Enabled() bool { return s.cfg.CA != nil }

// Bundle is the CA bundle agents are given (nil when disabled).
func (s *Service) Bundle() []byte { return s.cfg.Bundle }

// Revoked reports whether serial (lowercase hex) is on the revocation list
// now (a renewed certificate is once its RenewalGrace ended). It never
// blocks: TLS handshakes call it.
func (s *Service) Revoked(serial string) bool {
	at, ok := (*s.revoked.Load())[serial]
	return ok && !s.cfg.Now().Before(at)
}

// RevokedNode reports whether the node's newest certificate is revoked,
// and why. It never blocks: gossip claim checks call it.
func (s *Service) RevokedNode(clusterID, nodeID string) (string, bool) {
	r, ok := (*s.nodes.Load())[clusterID+"/"+nodeID]
	return r, ok
}

// Generation changes every time the revocation list does: a client that
// keeps connections to agents drops them when it changes.
func (s *Service) Generation() uint64 { return s.gen.Load() }

// OnChange registers fn, called outside any lock after the revocation list
// changed (from Run, or from a Revoke on this replica: fn must be safe to
// call concurrently). Register before Run.
func (s *Service) OnChange(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, fn)
}

// Refresh reads the revocation list from the store. Replicas share it
// through the store; Run calls Refresh after every commit it hears of.
func (s *Service) Refresh(ctx context.Context) error {
	var (
		certs []store.AgentCert
		nodes map[string]store.AgentCert
	)
	if err := s.st.Read(ctx, func(r store.Reader) error {
		var err error
		if certs, err = r.AgentCerts(ctx, "", ""); err != nil {
			return err
		}
		nodes, err = RevokedNodes(ctx, r, "")
		return err
	}); err != nil {
		return err
	}
	next := map[string]time.Time{}
	for _, c := range certs {
		if c.RevokedTS != nil {
			next[c.Serial] = *c.RevokedTS
		}
	}
	nextNodes := make(map[string]string, len(nodes))
	for k, c := range nodes {
		nextNodes[k] = c.RevokeReason
	}
	if maps.Equal(*s.revoked.Load(), next) && maps.Equal(*s.nodes.Load(), nextNodes) {
		return nil
	}
	s.revoked.Store(&next)
	s.nodes.Store(&nextNodes)
	s.gen.Add(1)
	s.mu.Lock()
	fns := slices.Clone(s.onChange)
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return nil
}

// Run loads the revocation list, then reloads it whenever the event log
// (of this replica or, on PostgreSQL, of another) shows an enrollment, a
// renewal or a revocation, until ctx ends. Other commits cost one read of their events.
func (s *Service) Run(ctx context.Context) {
	store.Follow(ctx, s.st, []string{store.EventNodeRevoked, store.EventNodeEnrolled, store.EventNodeCertRenewed},
		s.Refresh, func(err error, loaded bool) {
			if loaded {
				s.log.Warn("enroll: reading the revocation list failed; the last one stays", "err", err)
			} else {
				s.log.Warn("enroll: reading the revocation list failed; trying again at the next commit", "err", err)
			}
		})
}

// Caller is who sent a request, for the events.
type Caller struct {
	ClientAddr string
}

// Enroll checks the join token whose secret is secret and the request, and
// signs the request's CSR for its node and cluster, taking one use of the
// token in the same transaction as the certificate's record and its
// node.enrolled event. A refusal of a known token is a node.enroll_refused
// event, at most one a minute per token; one without a known token is only
// logged, one line a minute for all (refusals.go).
func (s *Service) Enroll(ctx context.Context, secret string, req wire.EnrollRequest, c Caller) (*wire.EnrollResponse, error) {
	tokName := ""
	refuse := func(err error) (*wire.EnrollResponse, error) {
		s.refused(ctx, store.EventNodeEnrollRefused, refusalKey("token", tokName), tokName, req.ClusterID, req.NodeID, c, err)
		return nil, err
	}
	if !s.Enabled() {
		return nil, ErrDisabled
	}
	var tok *store.Token
	err := s.st.Read(ctx, func(r store.Reader) error {
		var err error
		tok, err = r.TokenByHash(ctx, auth.Hash(secret))
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(fmt.Errorf("%w: unknown or revoked join token", auth.ErrUnauthenticated))
	case err != nil:
		return nil, err
	}
	tokName = tok.Name
	if err := names.CheckID(req.NodeID); err != nil {
		return refuse(fmt.Errorf("%w: node_id: %w", ErrInvalid, err))
	}
	if err := names.CheckID(req.ClusterID); err != nil {
		return refuse(fmt.Errorf("%w: cluster_id: %w", ErrInvalid, err))
	}
	if req.Replaces != "" {
		if err := names.CheckID(req.Replaces); err != nil {
			return refuse(fmt.Errorf("%w: replaces: %w", ErrInvalid, err))
		}
		if req.Replaces == req.NodeID {
			return refuse(fmt.Errorf("%w: replaces: a node cannot replace itself", ErrInvalid))
		}
	}
	now := s.cfg.Now().UTC()
	admin := auth.Can(tok.Roles, auth.Revoke)
	switch {
	case !auth.Can(tok.Roles, auth.Enroll):
		return refuse(fmt.Errorf("%w: token %s (roles %s) is not a join token", ErrRefused, tok.Name, strings.Join(tok.Roles, ",")))
	case tok.Expired(now):
		return refuse(fmt.Errorf("%w: join token %s expired at %s", auth.ErrUnauthenticated, tok.Name, tok.ExpiresTS.Format(time.RFC3339)))
	case tok.ClusterID != "" && tok.ClusterID != req.ClusterID:
		return refuse(fmt.Errorf("%w: join token %s is for cluster %s, not %s", ErrRefused, tok.Name, tok.ClusterID, req.ClusterID))
	case tok.UsesLeft != nil && *tok.UsesLeft <= 0:
		return refuse(fmt.Errorf("%w: join token %s is used up", ErrRefused, tok.Name))
	case req.Replace && !admin:
		return refuse(fmt.Errorf("%w: replace needs an admin token; join token %s may only enroll a free node id", ErrRefused, tok.Name))
	}
	csr, err := tlsutil.ParseAgentCSR([]byte(req.CSR), req.NodeID)
	if err != nil {
		return refuse(err)
	}
	var out *wire.EnrollResponse
	err = s.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		// A node id names one node: the same id in another cluster would
		// let this token's certificate claim that node (gossip names
		// nodes by id).
		if other, err := clusterHolding(ctx, tx, req.NodeID, req.ClusterID); err != nil {
			return err
		} else if other != "" {
			return fmt.Errorf("%w: node id %s belongs to cluster %s; a join token for cluster %s cannot enroll it (forget the node there first, or pick another id)",
				ErrHeld, req.NodeID, other, req.ClusterID)
		}
		certs, err := tx.AgentCerts(ctx, "", req.NodeID)
		if err != nil {
			return err
		}
		if !req.Replace {
			if err := s.heldOtherwise(ctx, tx, req.ClusterID, req.NodeID, certs); err != nil {
				return err
			}
		}
		var live []string
		for _, lc := range certs {
			if lc.Live(now) {
				live = append(live, fmt.Sprintf("serial %s (cluster %s, until %s)", lc.Serial, lc.ClusterID, lc.NotAfter.Format(time.RFC3339)))
			}
		}
		replaced := []string{}
		if len(live) > 0 {
			if !req.Replace {
				return fmt.Errorf("%w: node %s is held by %s; revoke it (muster node revoke) or enroll with --replace and an admin token",
					ErrHeld, req.NodeID, strings.Join(live, ", "))
			}
			if replaced, err = tx.RevokeAgentCerts(ctx, "", req.NodeID, now, "replaced", tok.Name); err != nil {
				return err
			}
		}
		if _, err := tx.PruneAgentCerts(ctx, req.NodeID, now); err != nil {
			return err
		}
		left, err := tx.UseToken(ctx, tok.Hash)
		if errors.Is(err, store.ErrUsedUp) {
			return fmt.Errorf("%w: join token %s is used up", errUsedUp, tok.Name)
		} else if err != nil {
			return err
		}
		resp, rec, err := s.sign(csr, req.NodeID, req.ClusterID, now, tok.Name)
		if err != nil {
			return err
		}
		// The certificate carries its join token's labels: the core
		// holds them for the node (its agent cannot change them), and a
		// renewal keeps them.
		rec.Labels = maps.Clone(tok.Labels)
		if err := tx.InsertAgentCert(ctx, rec); err != nil {
			return err
		}
		if prev := store.EnrolledLabels(certs, req.ClusterID); s.cfg.HoldLabels != nil && len(prev)+len(rec.Labels) > 0 {
			if err := s.cfg.HoldLabels(ctx, tx, req.ClusterID, req.NodeID, prev, rec.Labels); err != nil {
				return err
			}
		}
		data := map[string]any{"token": tok.Name, "serial": rec.Serial, "not_after": rec.NotAfter.Format(time.RFC3339)}
		msg := fmt.Sprintf("node %s enrolled into cluster %s with join token %s (certificate %s until %s)",
			req.NodeID, req.ClusterID, tok.Name, rec.Serial, rec.NotAfter.Format(time.RFC3339))
		if len(rec.Labels) > 0 {
			data["labels"] = rec.Labels
			msg += "; the core holds its labels " + labels.Set(rec.Labels).String()
		}
		if left >= 0 {
			data["uses_left"] = left
			msg += fmt.Sprintf("; %d uses left", left)
		}
		if len(replaced) > 0 {
			data["replaced"] = replaced
			msg += "; replaced " + strings.Join(replaced, ", ")
		}
		out = resp
		if err := tx.AppendEvent(ctx, &store.Event{TS: now, Type: store.EventNodeEnrolled, Actor: tok.Name, ClientAddr: c.ClientAddr,
			ClusterID: req.ClusterID, NodeID: req.NodeID, Message: msg, Data: data}); err != nil {
			return err
		}
		return s.requestReplace(ctx, tx, req, tok.Name, c, now)
	})
	if err != nil {
		if errors.Is(err, errUsedUp) {
			return refuse(err)
		}
		if errors.Is(err, ErrHeld) || errors.Is(err, ErrRefused) {
			return refuse(err)
		}
		return nil, err
	}
	if req.Replace {
		s.refreshNow(ctx)
	}
	return out, nil
}

// requestReplace records, when the enrollment req names a node it
// replaces, the request an admin approves by replacing that node with
// this one (core/ops ReplaceNode), with its node.replace_requested event;
// the node it names must be a node or a declared place of the cluster
// (an ErrInvalid otherwise). An enrollment naming none removes the node's
// earlier request. Nothing of the membership changes until then.
func (s *Service) requestReplace(ctx context.Context, tx store.Tx, req wire.EnrollRequest, token string, c Caller, now time.Time) error {
	if req.Replaces == "" {
		_, err := tx.DeleteReplaceRequest(ctx, req.ClusterID, req.NodeID)
		return err
	}
	ok, err := s.isPlace(ctx, tx, req.ClusterID, req.Replaces)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: replaces: %s is neither a node nor a declared place of cluster %s", ErrInvalid, req.Replaces, req.ClusterID)
	}
	if err := tx.PutReplaceRequest(ctx, &store.ReplaceRequest{ClusterID: req.ClusterID, NodeID: req.NodeID,
		Replaces: req.Replaces, Token: token, RequestedTS: now}); err != nil {
		return err
	}
	return tx.AppendEvent(ctx, &store.Event{TS: now, Type: store.EventNodeReplaceRequested, Actor: token, ClientAddr: c.ClientAddr,
		ClusterID: req.ClusterID, NodeID: req.NodeID,
		Message: fmt.Sprintf("node %s enrolled into cluster %s asking to replace node %s; an admin approves with: muster node replace %s --with %s --cluster %s",
			req.NodeID, req.ClusterID, req.Replaces, req.Replaces, req.NodeID, req.ClusterID),
		Data: map[string]any{"replaces": req.Replaces, "token": token}})
}

// isPlace says whether id is a node of cluster clusterID (stored, or in
// the configuration's list), a node its membership declares, or a place
// a node took by a replace.
func (s *Service) isPlace(ctx context.Context, rd store.Reader, clusterID, id string) (bool, error) {
	if _, ok := s.cfg.Configured[clusterID+"/"+id]; ok {
		return true, nil
	}
	if s.cfg.Declared != nil && s.cfg.Declared(clusterID, id) {
		return true, nil
	}
	all, err := rd.Nodes(ctx, clusterID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(all, func(n store.Node) bool { return n.ID == id || n.Replaces == id }), nil
}

// Renew signs a new CSR for the agent whose certificate peer is (the
// client certificate of a mutual TLS connection): it must chain to the
// agent CA, be unexpired, be one this core signed, and not be revoked. The
// new certificate keeps the old one's node and cluster.
func (s *Service) Renew(ctx context.Context, peer []*x509.Certificate, req wire.RenewRequest, c Caller) (*wire.EnrollResponse, error) {
	// node and cluster are set only from a certificate the agent CA
	// signed: only then is a refusal an event (named after that node).
	// Anyone who reaches the listener can send the others; they are
	// logged. The events are limited per node, the identity the CA
	// vouched for, not per serial: a node that renewed n times holds n
	// retired certificates (and as many once expired), and cycling
	// through them would defeat a limiter keyed by serial.
	node, cluster, serial := "", "", ""
	refuse := func(err error) (*wire.EnrollResponse, error) {
		key := ""
		if node != "" {
			key = refusalKey("node", cluster+"/"+node)
		}
		s.refused(ctx, store.EventNodeRenewRefused, key, node, cluster, node, c, err)
		return nil, err
	}
	if !s.Enabled() {
		return nil, ErrDisabled
	}
	if len(peer) == 0 {
		return refuse(fmt.Errorf("%w: renewal needs the agent's certificate as client certificate (mutual TLS)", auth.ErrUnauthenticated))
	}
	leaf := peer[0]
	serial = tlsutil.SerialHex(leaf)
	now := s.cfg.Now().UTC()
	inter := x509.NewCertPool()
	for _, ic := range peer[1:] {
		inter.AddCert(ic)
	}
	signedHere := func() {
		if id, ok := tlsutil.IdentityOf(leaf); ok && id.Role == tlsutil.RoleAgent {
			node, cluster = id.Name, tlsutil.ClusterOf(leaf)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: s.pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			// Signed by the agent CA, and the handshake proved its key:
			// the node is known, its certificate only too old.
			if leaf.CheckSignatureFrom(s.cfg.CA.Cert) == nil {
				signedHere()
			}
			return refuse(fmt.Errorf("%w: the certificate (serial %s) expired at %s; enroll again with a join token",
				auth.ErrUnauthenticated, tlsutil.SerialHex(leaf), leaf.NotAfter.UTC().Format(time.RFC3339)))
		}
		return refuse(fmt.Errorf("%w: the certificate does not verify against the agent CA: %v", auth.ErrUnauthenticated, err))
	}
	signedHere()
	if node == "" {
		return refuse(fmt.Errorf("%w: the certificate names no agent", auth.ErrUnauthenticated))
	}
	var rec *store.AgentCert
	err := s.st.Read(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.AgentCert(ctx, serial)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(fmt.Errorf("%w: certificate %s was not issued by enrollment; enroll with a join token", ErrRefused, serial))
	case err != nil:
		return nil, err
	}
	cluster = rec.ClusterID
	if err := renewable(rec, node); err != nil {
		return refuse(err)
	}
	csr, err := tlsutil.ParseAgentCSR([]byte(req.CSR), node)
	if err != nil {
		return refuse(err)
	}
	var out *wire.EnrollResponse
	err = s.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		// The certificate is retired by its renewal, in one statement
		// that a concurrent renewal or revocation (on any replica) makes
		// fail: one renewal per certificate.
		// (Stored to the microsecond: cut, not rounded up.)
		retired, err := tx.RetireAgentCert(ctx, serial, now.Add(RenewalGrace).Truncate(time.Microsecond), ReasonRenewed, RenewalActor)
		if err != nil {
			return err
		}
		if !retired {
			cur, err := tx.AgentCert(ctx, serial)
			if err != nil {
				return err
			}
			return renewable(cur, node)
		}
		// The node's expired certificates go: they fail every handshake.
		if _, err := tx.PruneAgentCerts(ctx, node, now); err != nil {
			return err
		}
		resp, nrec, err := s.sign(csr, node, cluster, now, RenewalActor)
		if err != nil {
			return err
		}
		nrec.Labels = rec.Labels // the join token's, kept
		if err := tx.InsertAgentCert(ctx, nrec); err != nil {
			return err
		}
		out = resp
		return tx.AppendEvent(ctx, &store.Event{TS: now, Type: store.EventNodeCertRenewed, Actor: node, ClientAddr: c.ClientAddr,
			ClusterID: cluster, NodeID: node,
			Message: fmt.Sprintf("node %s renewed its certificate %s: new certificate %s until %s", node, serial, nrec.Serial,
				nrec.NotAfter.Format(time.RFC3339)),
			Data: map[string]any{"old_serial": serial, "serial": nrec.Serial, "not_after": nrec.NotAfter.Format(time.RFC3339)}})
	})
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return refuse(err)
		}
		return nil, err
	}
	s.refreshNow(ctx)
	return out, nil
}

// renewable refuses a certificate revoked, or retired by a renewal.
func renewable(c *store.AgentCert, node string) error {
	switch {
	case c.RevokedTS == nil:
		return nil
	case c.RevokeReason == ReasonRenewed && c.RevokedBy == RenewalActor:
		return fmt.Errorf("%w: certificate %s of node %s was renewed already: only its newest certificate renews (enroll again with a join token if that one is lost)",
			ErrRefused, c.Serial, node)
	}
	return fmt.Errorf("%w: certificate %s of node %s is revoked (%s); enroll again with a new join token",
		ErrRefused, c.Serial, node, c.RevokeReason)
}

// heldOtherwise refuses a node id that a node holds without a certificate
// from enrollment: one in the static list not marked `enroll: true`, or
// one the core knows (announced by gossip, with a hand-made certificate).
// Once the node's id has had a certificate from enrollment in this
// cluster (certs), enrollment manages it: the live-certificate rule
// applies. Only an admin's replace takes a node held otherwise.
func (s *Service) heldOtherwise(ctx context.Context, r store.Reader, cluster, node string, certs []store.AgentCert) error {
	for _, c := range certs {
		if c.ClusterID == cluster {
			return nil
		}
	}
	enrollable, configured := s.cfg.Configured[cluster+"/"+node]
	switch {
	case configured && enrollable:
		return nil
	case configured:
		return fmt.Errorf("%w: node %s of cluster %s is in the core's static list without `enroll: true`; mark it so in the configuration, or enroll with --replace and an admin token",
			ErrHeld, node, cluster)
	}
	_, err := r.Node(ctx, cluster, node)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: node %s of cluster %s is known to the core without a certificate from enrollment (a hand-made one); forget the node first, or enroll with --replace and an admin token",
		ErrHeld, node, cluster)
}

// Revoke puts every unrevoked certificate of the node on the revocation
// list, with a node.revoked event, and reloads the list at once. A node
// with no certificate from enrollment is store.ErrNotFound; one whose
// certificates are all revoked already is revoked again with none.
func (s *Service) Revoke(ctx context.Context, clusterID, nodeID, reason, actor string, c Caller) ([]string, error) {
	now := s.cfg.Now().UTC()
	var serials []string
	err := s.st.Update(ctx, func(tx store.Tx) error {
		certs, err := tx.AgentCerts(ctx, clusterID, nodeID)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return fmt.Errorf("node %s of cluster %s has no certificate from enrollment: %w", nodeID, clusterID, store.ErrNotFound)
		}
		serials, err = RevokeIn(ctx, tx, clusterID, nodeID, reason, actor, c, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.refreshNow(ctx)
	return serials, nil
}

// RevokeIn is Revoke in the caller's transaction, as of now: it revokes
// every unrevoked certificate of the node (none when it has none, and
// then writes nothing) with a node.revoked event, and returns their
// serials. The caller calls Refresh once it committed (a nil Service's
// list has nothing to reload).
func RevokeIn(ctx context.Context, tx store.Tx, clusterID, nodeID, reason, actor string, c Caller, now time.Time) ([]string, error) {
	if reason == "" {
		reason = "revoked"
	}
	// A revoked node's request to replace another goes with it.
	if _, err := tx.DeleteReplaceRequest(ctx, clusterID, nodeID); err != nil {
		return nil, err
	}
	serials, err := tx.RevokeAgentCerts(ctx, clusterID, nodeID, now, reason, actor)
	if err != nil || len(serials) == 0 {
		return nil, err
	}
	sort.Strings(serials)
	return serials, tx.AppendEvent(ctx, &store.Event{TS: now, Type: store.EventNodeRevoked, Actor: actor, ClientAddr: c.ClientAddr,
		ClusterID: clusterID, NodeID: nodeID,
		Message: fmt.Sprintf("node %s revoked (%s): certificates %s", nodeID, reason, strings.Join(serials, ", ")),
		Data:    map[string]any{"serials": serials, "reason": reason}})
}

// Reload reads the revocation list again after a commit of the caller's
// that revoked certificates (RevokeIn); a failure is logged, and Run reads
// it again after the next commit it hears of.
func (s *Service) Reload(ctx context.Context) { s.refreshNow(ctx) }

// Now is the clock the service stamps revocations with.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// RevokedNodes returns, for the nodes of a cluster (every cluster when
// ""), keyed "cluster/node", the revocation of those whose newest
// certificate is revoked: the node is refused until it enrolls again.
func RevokedNodes(ctx context.Context, r store.Reader, clusterID string) (map[string]store.AgentCert, error) {
	certs, err := r.AgentCerts(ctx, clusterID, "")
	if err != nil {
		return nil, err
	}
	out := map[string]store.AgentCert{}
	seen := map[string]bool{}
	for _, c := range certs { // newest first
		k := c.ClusterID + "/" + c.NodeID
		if seen[k] {
			continue
		}
		seen[k] = true
		if c.RevokedTS != nil {
			out[k] = c
		}
	}
	return out, nil
}

func (s *Service) refreshNow(ctx context.Context) {
	if err := s.Refresh(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("enroll: reading the revocation list failed", "err", err)
	}
}

// errUsedUp: the join token's last use went while this request waited.
var errUsedUp = fmt.Errorf("%w: used up", ErrRefused)

// clusterHolding returns a cluster other than cluster whose nodes include
// nodeID ("" when none).
func clusterHolding(ctx context.Context, r store.Reader, nodeID, cluster string) (string, error) {
	clusters, err := r.Clusters(ctx)
	if err != nil {
		return "", err
	}
	for _, cl := range clusters {
		if cl.ID == cluster {
			continue
		}
		_, err := r.Node(ctx, cl.ID, nodeID)
		switch {
		case err == nil:
			return cl.ID, nil
		case !errors.Is(err, store.ErrNotFound):
			return "", err
		}
	}
	return "", nil
}

// sign signs csr and returns the answer and the record to store.
func (s *Service) sign(csr *x509.CertificateRequest, node, cluster string, now time.Time, by string) (*wire.EnrollResponse, *store.AgentCert, error) {
	certPEM, cert, err := s.cfg.CA.SignAgent(csr, node, cluster, now, s.cfg.Lifetime)
	if err != nil {
		return nil, nil, err
	}
	rec := &store.AgentCert{Serial: tlsutil.SerialHex(cert), ClusterID: cluster, NodeID: node,
		NotBefore: cert.NotBefore.UTC(), NotAfter: cert.NotAfter.UTC(), IssuedTS: now.Round(time.Microsecond), IssuedBy: by}
	return &wire.EnrollResponse{NodeID: node, ClusterID: cluster, Certificate: string(certPEM), CABundle: string(s.cfg.Bundle),
		GossipKey: s.cfg.GossipKey, Serial: rec.Serial, NotAfter: rec.NotAfter}, rec, nil
}

// refused writes a refusal down, at most once a minute per key (one line
// a minute for every caller without a key together): a log line and, for
// a known key (a join token, a certificate the agent CA signed), an event
// in a transaction of its own, each with the count of refusals it stands
// for. The reason is cut to maxRefusalReason bytes; no reason quotes the
// CSR.
func (s *Service) refused(ctx context.Context, typ, key, actor, cluster, node string, c Caller, cause error) {
	limitKey := key
	if limitKey == "" {
		limitKey = "unknown " + typ
	}
	pass, count := s.refusals.allow(limitKey, s.cfg.Now())
	if !pass {
		return
	}
	reason := shorten(cause.Error(), maxRefusalReason)
	s.log.Warn("enroll: refused", "type", typ, "client", c.ClientAddr, "reason", reason, "count", count)
	if key == "" {
		// No known token was shown, nor a certificate of the agent CA:
		// anyone who reaches the listener could send this.
		return
	}
	ev := &store.Event{Type: typ, Actor: actor, ClientAddr: c.ClientAddr, Message: reason, Data: map[string]any{"count": count}}
	// Only well-formed ids name the event's node and cluster; the
	// message says what was asked for.
	if names.CheckID(cluster) == nil {
		ev.ClusterID = cluster
	}
	if names.CheckID(node) == nil {
		ev.NodeID = node
	}
	ctx = context.WithoutCancel(ctx)
	if err := s.st.Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(ctx, ev) }); err != nil {
		s.log.Warn("enroll: recording a refusal failed", "err", err, "reason", reason)
	}
}
