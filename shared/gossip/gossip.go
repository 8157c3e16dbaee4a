// Package gossip is the one place that runs a memberlist instance: agents
// and the core join one encrypted pool, each member announcing a small
// metadata record (Meta, one codec for both sides). A Service starts the
// instance, joins the pool (and joins again while it has lost what it
// looks for), hands membership events to its owner in order, and leaves
// gracefully on Stop.
//
// memberlist reports a member that left gracefully and one that failed
// through the same callback, without saying which (the node it passes
// carries no state). So a member about to leave first tells the cores
// directly (a reliable message: "I am leaving"); a core's delegate remembers
// it and reports the disappearance that follows as a leave, not a failure.
// Every key holder can send such a message, so it carries a proof: the
// secret whose digest the member announced in its metadata (Meta.Leave)
// when it started. An intent counts only for the member that sends it, and
// the intents waiting for their disappearance are bounded (maxIntents).
//
// memberlist calls its delegates on its own goroutines and expects them to
// return at once. The delegates here only copy the node's data (name,
// address, decoded metadata, and whether it joined, changed, left or
// failed) into an in-memory FIFO and wake the service's loop; the loop
// calls the owner's handler. Nothing here calls memberlist from a delegate,
// and nothing keeps a pointer memberlist owns.
package gossip

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/musterhq/muster/shared/startstop"
)

// Kind is what happened to a member.
type Kind int

// Event kinds. A member that left gracefully (it said so before going) is
// KindLeave; one the pool declared dead is KindFail.
const (
	KindJoin Kind = iota + 1
	KindUpdate
	KindLeave
	KindFail
	// KindChanged is an agent's note that its actions changed (Meta holds
	// only the cluster and node it named). It says nothing about membership.
	KindChanged
)

func (k Kind) String() string {
	switch k {
	case KindJoin:
		return "join"
	case KindUpdate:
		return "update"
	case KindLeave:
		return "leave"
	case KindFail:
		return "fail"
	case KindChanged:
		return "changed"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a membership change, copied out of memberlist.
type Event struct {
	Kind Kind
	Name string // the member's unique name in the pool
	Addr string // its gossip address, host:port
	Meta Meta
	TS   time.Time // when memberlist reported it
	// left: memberlist was told by the member itself that it left (its
	// own leave message), not by the pool that it failed. Only such a
	// disappearance waits for the leave intent (leaveGrace).
	left bool
}

// Member is a live member, copied out of memberlist.
type Member struct {
	Name string
	Addr string
	Meta Meta
}

// Label marks muster's packets, so that a muster pool and another
// memberlist pool (Consul, Nomad) on the same port never mix.
const Label = "muster"

// Config describes one member.
type Config struct {
	// Name is the member's name, unique in the pool.
	Name string
	// BindAddr is the gossip listen address, host:port (UDP and TCP); port
	// 0 picks a free one. On 0.0.0.0, memberlist advertises the host's
	// first private address.
	BindAddr string
	// Join lists members to join (host:port); empty: wait to be joined.
	Join []string
	// Key encrypts and authenticates every packet (KeySize bytes). It is
	// required unless Insecure.
	Key      []byte
	Insecure bool
	// Meta is what this member announces.
	Meta   Meta
	Timing Timing
	// Seek is the role this member needs to see in the pool ("" for any
	// other member). While no live member has it, the service joins Join
	// again: every second at first, backing off to RejoinInterval.
	Seek           string
	RejoinInterval time.Duration
	// LeaveTimeout bounds how long Stop waits for the leave message to go out.
	LeaveTimeout time.Duration
	// Handler receives every event about other members, in order, on the
	// service's goroutine. It may block briefly and may call the Service.
	Handler func(Event)
	Log     *slog.Logger
}

// Errors of the service.
var (
	ErrNoKey = errors.New("gossip needs an encryption key (gossip.key_file), or gossip.insecure: true")
	// ErrStarted and ErrStopped are shared/startstop's: a service starts once.
	ErrStarted = startstop.ErrStarted
	ErrStopped = startstop.ErrStopped
)

// Service runs one memberlist instance. Build it with New (which starts
// nothing), run it with Start, end it with Stop: a shared/startstop part.
type Service struct {
	startstop.Base
	cfg  Config
	meta []byte
	// leaveProof is the secret of Meta.Leave, revealed by the leave intent.
	leaveProof string
	log        *slog.Logger
	q          *fifo
	// seen counts the live members (other than this one) with the sought role.
	seen atomic.Int64

	// stopMu makes Stops wait for each other: the pool is left once,
	// before the service's goroutines end.
	stopMu sync.Mutex
	mu     sync.Mutex
	ml     *memberlist.Memberlist // while running: set by Start, cleared by Stop
	left   bool                   // Stop has begun: Start makes no instance
	addr   string
}

// New checks cfg and returns a service; it opens and starts nothing.
func New(cfg Config) (*Service, error) {
	if cfg.Name == "" {
		return nil, errors.New("gossip: a member needs a name")
	}
	if len(cfg.Key) == 0 && !cfg.Insecure {
		return nil, ErrNoKey
	}
	if len(cfg.Key) > 0 && len(cfg.Key) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(cfg.Key), KeySize)
	}
	if _, _, err := splitAddr(cfg.BindAddr); err != nil {
		return nil, fmt.Errorf("gossip bind address: %w", err)
	}
	if cfg.Timing.Profile == "" {
		cfg.Timing.Profile = ProfileLAN
	}
	if err := cfg.Timing.Validate("gossip").Err(); err != nil {
		return nil, err
	}
	secret := make([]byte, leaveSecretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	cfg.Meta.Leave = leaveCommit(secret)
	meta, err := EncodeMeta(cfg.Meta)
	if err != nil {
		return nil, err
	}
	if cfg.RejoinInterval <= 0 {
		cfg.RejoinInterval = 30 * time.Second
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, meta: meta, leaveProof: base64.RawURLEncoding.EncodeToString(secret),
		log: cfg.Log.With("component", "gossip"), q: newFIFO()}, nil
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	return host, port, nil
}

// Start creates the memberlist instance (binding its port), then joins the
// pool in the background and delivers events until Stop or the end of ctx.
func (s *Service) Start(ctx context.Context) error {
	ctx, done, err := s.StartInit(ctx)
	if err != nil {
		return err
	}
	host, port, _ := splitAddr(s.cfg.BindAddr)
	c := s.cfg.Timing.config()
	c.Name = s.cfg.Name
	c.BindAddr, c.BindPort = host, port
	c.AdvertisePort = port
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		c.AdvertiseAddr = host
	}
	c.Label = Label
	c.SecretKey = s.cfg.Key
	c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
	d := &delegate{meta: s.meta, q: s.q, log: s.log}
	c.Delegate, c.Events, c.Conflict = d, d, d
	c.Logger = log.New(&logWriter{log: s.log}, "", 0)
	ml, err := memberlist.Create(c)
	if err != nil {
		done()
		return fmt.Errorf("gossip: %w", err)
	}
	self := ml.LocalNode()
	s.mu.Lock()
	if s.left { // a Stop came while the instance was made
		s.mu.Unlock()
		_ = ml.Shutdown()
		done()
		return ErrStopped
	}
	s.ml = ml
	s.addr = net.JoinHostPort(self.Addr.String(), strconv.Itoa(int(self.Port)))
	s.mu.Unlock()
	s.log.Info("gossip started", "name", s.cfg.Name, "addr", s.addr, "encrypted", len(s.cfg.Key) > 0,
		"profile", s.cfg.Timing.Profile, "probe_interval", c.ProbeInterval, "suspicion_mult", c.SuspicionMult)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.loop(ctx, d) }()
	go func() { defer wg.Done(); s.joiner(ctx, ml) }()
	go func() { wg.Wait(); done() }()
	return nil
}

// Stop leaves the pool gracefully (waiting up to LeaveTimeout for the
// message to go out), shuts memberlist down and waits for the service's
// goroutines. It is idempotent, and returns at once on a service never
// started.
func (s *Service) Stop() {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	s.mu.Lock()
	ml := s.ml
	s.ml, s.left = nil, true
	s.mu.Unlock()
	if ml != nil {
		s.tellLeaving(ml)
		if err := ml.Leave(s.cfg.LeaveTimeout); err != nil {
			s.log.Warn("gossip leave", "err", err)
		}
		if err := ml.Shutdown(); err != nil {
			s.log.Warn("gossip shutdown", "err", err)
		}
		s.log.Info("gossip left")
	}
	s.Base.Stop()
}

// Addr is the gossip address this member advertises, once started.
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Members returns the live members, this one included, copied.
func (s *Service) Members() []Member {
	s.mu.Lock()
	ml := s.ml
	s.mu.Unlock()
	if ml == nil {
		return nil
	}
	var out []Member
	for _, n := range ml.Members() {
		m, _ := DecodeMeta(n.Meta)
		out = append(out, Member{Name: n.Name, Addr: n.Address(), Meta: m})
	}
	return out
}

// leaveSecretSize is the size of a member's leave secret.
const leaveSecretSize = 16

// maxIntents bounds the leave intents a core holds at once (each waits for
// its member's disappearance).
const maxIntents = 1024

// leaveCommit is the digest of a leave secret announced in Meta.Leave.
func leaveCommit(secret []byte) string {
	sum := sha256.Sum256(secret)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// proves reports whether proof is the secret of the commitment.
func proves(proof, commit string) bool {
	secret, err := base64.RawURLEncoding.DecodeString(proof)
	if err != nil || len(secret) != leaveSecretSize || commit == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(leaveCommit(secret)), []byte(commit)) == 1
}

// tellLeaving tells every live core that this member is leaving (a note
// with the proof: the secret whose digest it announced as Meta.Leave), and
// waits (up to LeaveTimeout) for the messages to be written.
func (s *Service) tellLeaving(ml *memberlist.Memberlist) {
	msg, err := EncodeNote(Note{Leaving: s.cfg.Name, Proof: s.leaveProof})
	if err != nil {
		s.log.Warn("gossip: leave intent", "err", err)
		return
	}
	s.send(ml, RoleCore, msg)
}

// Tell sends n to every live member with the given role over memberlist's
// reliable channel, and returns how many members it reached. It waits (up
// to LeaveTimeout) for the sends; it does nothing before Start or after Stop.
func (s *Service) Tell(role string, n Note) int {
	msg, err := EncodeNote(n)
	if err != nil {
		s.log.Warn("gossip: note not sent", "err", err)
		return 0
	}
	s.mu.Lock()
	ml := s.ml
	s.mu.Unlock()
	if ml == nil {
		return 0
	}
	return s.send(ml, role, msg)
}

// send writes msg to every live member with role, at once, and waits (up
// to LeaveTimeout) for the writes. It returns how many succeeded in time.
func (s *Service) send(ml *memberlist.Memberlist, role string, msg []byte) int {
	var cores []memberlist.Node
	for _, n := range ml.Members() {
		if m, err := DecodeMeta(n.Meta); err == nil && m.Role == role && n.Name != s.cfg.Name {
			cores = append(cores, *n) // copied: memberlist owns n
		}
	}
	if len(cores) == 0 {
		return 0
	}
	done := make(chan bool, len(cores))
	for i := range cores {
		go func(n *memberlist.Node) {
			err := ml.SendReliable(n, msg)
			if err != nil {
				s.log.Debug("gossip: note not delivered", "to", n.Name, "err", err)
			}
			done <- err == nil
		}(&cores[i])
	}
	t := time.NewTimer(s.cfg.LeaveTimeout)
	defer t.Stop()
	sent := 0
	for range cores {
		select {
		case ok := <-done:
			if ok {
				sent++
			}
		case <-t.C:
			return sent // the sends end with Shutdown's closed transport
		}
	}
	return sent
}

// leaveGrace is how long a member's disappearance without a leave intent
// is held before it is told as a failure, when memberlist was told of it by
// the member's own leave message: the intent travels over TCP while that
// message travels over UDP, and the latter can be processed first. A
// member the pool declared dead (its suspicion ran out, seconds after it
// stopped answering) is told at once: an intent it sent would have come
// long before.
const leaveGrace = 500 * time.Millisecond

// loop delivers events to the handler, in order (a held failure is
// delivered before any later event about the same member).
func (s *Service) loop(ctx context.Context, d *delegate) {
	alive := map[string]bool{}       // names of other live members with the sought role
	pending := map[string]heldFail{} // disappearances waiting for a leave intent
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	emit := func(ev Event) {
		wanted := s.cfg.Seek == "" || ev.Meta.Role == s.cfg.Seek
		switch ev.Kind {
		case KindJoin, KindUpdate:
			if wanted {
				alive[ev.Name] = true
			} else {
				delete(alive, ev.Name)
			}
		case KindLeave, KindFail:
			delete(alive, ev.Name)
			d.forget(ev.Name, ev.Meta.Leave)
		}
		s.seen.Store(int64(len(alive)))
		s.log.Debug("gossip event", "kind", ev.Kind.String(), "member", ev.Name, "addr", ev.Addr,
			"role", ev.Meta.Role, "cluster", ev.Meta.Cluster, "node", ev.Meta.Node)
		if s.cfg.Handler != nil {
			s.cfg.Handler(ev)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.q.wake:
		case <-timer.C:
		}
		for _, ev := range s.q.take() {
			if ev.Kind == KindChanged {
				// Not about membership: straight to the handler.
				if s.cfg.Handler != nil {
					s.cfg.Handler(ev)
				}
				continue
			}
			if ev.Name == s.cfg.Name {
				continue
			}
			if h, ok := pending[ev.Name]; ok { // keep the order of events per member
				delete(pending, ev.Name)
				emit(h.ev)
			}
			switch {
			case ev.Kind == KindFail && d.said(ev.Name):
				ev.Kind = KindLeave
			case ev.Kind == KindFail && ev.left:
				pending[ev.Name] = heldFail{ev: ev, until: time.Now().Add(leaveGrace)}
				continue
			}
			emit(ev)
		}
		next := time.Duration(0)
		for name, h := range pending {
			switch left := time.Until(h.until); {
			case d.said(name):
				h.ev.Kind = KindLeave
				fallthrough
			case left <= 0:
				delete(pending, name)
				emit(h.ev)
			case next == 0 || left < next:
				next = left
			}
		}
		if next > 0 {
			timer.Reset(next)
		}
	}
}

// heldFail is a failure waiting out leaveGrace.
type heldFail struct {
	ev    Event
	until time.Time
}

// joiner joins Join at start and again whenever no live member has the
// sought role (the pool was lost, or the seed restarted).
func (s *Service) joiner(ctx context.Context, ml *memberlist.Memberlist) {
	if len(s.cfg.Join) == 0 {
		return
	}
	backoff := time.Second
	failing := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wait := s.cfg.RejoinInterval
		if s.seen.Load() == 0 {
			n, err := ml.Join(s.cfg.Join)
			switch {
			case n > 0:
				s.log.Info("gossip joined", "contacted", n, "members", ml.NumMembers())
				failing, backoff = false, time.Second
			default:
				if !failing {
					s.log.Warn("gossip join failed; retrying", "join", s.cfg.Join, "err", err)
				}
				failing = true
				wait, backoff = backoff, min(2*backoff, s.cfg.RejoinInterval)
			}
		}
		t.Reset(wait)
	}
}

// fifo is an unbounded queue of events: the delegates append and never
// wait; the loop takes everything at once.
type fifo struct {
	mu   sync.Mutex
	evs  []Event
	wake chan struct{}
}

func newFIFO() *fifo { return &fifo{wake: make(chan struct{}, 1)} }

func (q *fifo) push(ev Event) {
	q.mu.Lock()
	q.evs = append(q.evs, ev)
	q.mu.Unlock()
	q.signal()
}

// signal wakes the loop without an event; it never waits.
func (q *fifo) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *fifo) take() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs
}

// delegate is memberlist's view of this package: it announces the
// metadata and copies events into the fifo. It never blocks and never calls
// memberlist.
type delegate struct {
	meta []byte
	q    *fifo
	log  *slog.Logger

	mu      sync.Mutex
	commits map[string]string // member name → its Meta.Leave, from its join or update
	leaving map[string]bool   // members that proved they are leaving (at most maxIntents)
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil // EncodeMeta keeps it under MaxMetaSize
	}
	return d.meta
}

// NotifyMsg receives notes: agents' "changed" notes (queued as KindChanged
// events) and leave intents. An intent counts only when its proof is the
// secret of the commitment the named member announced, and while fewer than
// maxIntents wait. Anything else is dropped.
func (d *delegate) NotifyMsg(b []byte) {
	n, err := DecodeNote(b)
	if err != nil {
		d.log.Debug("gossip: unreadable note dropped", "err", err)
		return
	}
	if n.Changed != nil {
		d.q.push(Event{Kind: KindChanged, Meta: Meta{Role: RoleAgent, Cluster: n.Changed.Cluster, Node: n.Changed.Node},
			TS: time.Now()})
		return
	}
	d.mu.Lock()
	ok := proves(n.Proof, d.commits[n.Leaving])
	if ok && !d.leaving[n.Leaving] && len(d.leaving) >= maxIntents {
		ok = false
	}
	if ok {
		if d.leaving == nil {
			d.leaving = map[string]bool{}
		}
		d.leaving[n.Leaving] = true
	}
	d.mu.Unlock()
	if !ok {
		d.log.Debug("gossip: a leave intent without its member's proof, or over the limit, ignored", "leaving", n.Leaving)
		return
	}
	d.q.signal() // a held disappearance may now be told as a leave
}

// forget drops what the delegate keeps about a member that is gone, unless
// it has come back with another commitment since.
func (d *delegate) forget(name, commit string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.commits[name] == commit {
		delete(d.commits, name)
	}
	delete(d.leaving, name)
}

// said reports (and forgets) whether name said it was leaving.
func (d *delegate) said(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ok := d.leaving[name]
	delete(d.leaving, name)
	return ok
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node) {
	d.said(n.Name) // an intent from before this join is stale
	d.push(KindJoin, n)
}

func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.push(KindUpdate, n) }

// NotifyLeave tells a leave from a failure by the member's proven intent
// only (memberlist's own "left" can be claimed by any key holder).
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	if d.said(n.Name) {
		d.push(KindLeave, n)
	} else {
		d.push(KindFail, n)
	}
}

func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.log.Warn("gossip: two members use one name; the second is ignored", "name", existing.Name,
		"addr", existing.Address(), "other_addr", other.Address())
}

// push copies what the event needs out of n; n belongs to memberlist.
func (d *delegate) push(k Kind, n *memberlist.Node) {
	ev := Event{Kind: k, Name: n.Name, Addr: n.Address(), TS: time.Now(), left: n.State == memberlist.StateLeft}
	m, err := DecodeMeta(n.Meta)
	if err != nil {
		d.log.Warn("gossip: member with unreadable metadata ignored", "name", n.Name, "addr", ev.Addr, "err", err)
		return
	}
	ev.Meta = m
	if k == KindJoin || k == KindUpdate {
		d.mu.Lock()
		if d.commits == nil {
			d.commits = map[string]string{}
		}
		d.commits[n.Name] = m.Leave
		d.mu.Unlock()
	}
	d.q.push(ev)
}
