package gossip

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/testgoroutine"
	"github.com/musterhq/muster/shared/testwait"
)

func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	in := Meta{Role: RoleAgent, Cluster: "db", Node: "db-1", API: "10.0.0.1:7420"}
	b, err := EncodeMeta(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeMeta(b)
	in.V = MetaVersion
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("DecodeMeta(%s) = %+v, %v", b, out, err)
	}
}

func TestDecodeMeta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     Meta
		err      error
	}{
		{name: "newer version with unknown fields", in: `{"v":7,"role":"agent","node":"n","zone":"eu-1","caps":[1,2]}`,
			want: Meta{V: 7, Role: RoleAgent, Node: "n"}},
		{name: "core", in: `{"v":1,"role":"core","api":"127.0.0.1:7410"}`, want: Meta{V: 1, Role: RoleCore, API: "127.0.0.1:7410"}},
		{name: "no version", in: `{"role":"agent"}`, err: ErrBadMeta},
		{name: "no role", in: `{"v":1}`, err: ErrBadMeta},
		{name: "not json", in: "\x82\xa1v\x01", err: ErrBadMeta},
		{name: "empty", in: ``, err: ErrBadMeta},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeMeta([]byte(tc.in))
			if !errors.Is(err, tc.err) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeMeta(%q) = %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestEncodeMetaRefusesOversize(t *testing.T) {
	t.Parallel()
	_, err := EncodeMeta(Meta{Role: RoleAgent, Node: strings.Repeat("n", MaxMetaSize)})
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	s, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(s + "\n")
	if err != nil || len(k) != KeySize {
		t.Fatalf("ParseKey(GenerateKey()) = %d bytes, %v", len(k), err)
	}
	if s2, _ := GenerateKey(); s2 == s {
		t.Fatal("two keys are equal")
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(make([]byte, 16))} {
		if _, err := ParseKey(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseKey(%q) = %v", bad, err)
		}
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k2, err := ReadKeyFile(path); err != nil || string(k2) != string(k) {
		t.Fatalf("ReadKeyFile = %v", err)
	}
	if _, err := ReadKeyFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	ok := Config{Name: "a", BindAddr: "127.0.0.1:0", Insecure: true}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		err  error
	}{
		{"no key", func(c *Config) { c.Insecure = false }, ErrNoKey},
		{"short key", func(c *Config) { c.Key = make([]byte, 16) }, ErrBadKey},
		{"no name", func(c *Config) { c.Name = "" }, nil},
		{"bad bind", func(c *Config) { c.BindAddr = "7946" }, nil},
		{"bad profile", func(c *Config) { c.Timing.Profile = "wan" }, nil},
		{"timeout over interval", func(c *Config) { c.Timing.ProbeTimeout = 2 * time.Second }, nil},
		{"oversize meta", func(c *Config) { c.Meta.Node = strings.Repeat("n", 600) }, ErrMetaTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tc.edit(&c)
			_, err := New(c)
			if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("New = %v, want %v", err, tc.err)
			}
		})
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}

// fast is a timing for tests on loopback: failures are found in about a second.
var fast = Timing{Profile: ProfileLocal, ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond}

// recorder collects the events one member sees.
type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) handle(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) has(kind Kind, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.evs {
		if ev.Kind == kind && ev.Name == name {
			return true
		}
	}
	return false
}

func (r *recorder) named(name string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, ev := range r.evs {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// member starts a service on a free loopback port (the one named seed is a
// core, the others agents); it stops with the test.
func member(t *testing.T, name string, key []byte, join []string, h func(Event)) *Service {
	t.Helper()
	meta := Meta{Role: RoleAgent, Cluster: "c", Node: name, API: "127.0.0.1:1"}
	if name == "seed" {
		meta = Meta{Role: RoleCore, API: "127.0.0.1:2"}
	}
	s, err := New(Config{Name: name, BindAddr: "127.0.0.1:0", Join: join, Key: key, Insecure: key == nil, Timing: fast,
		Meta: meta, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func testKey(t *testing.T) []byte {
	t.Helper()
	s, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ParseKey(s)
	return k
}

func TestJoinLeaveAndFailAreTold(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	var rec recorder
	seed := member(t, "seed", key, nil, rec.handle)
	a := member(t, "a", key, []string{seed.Addr()}, nil)
	b := member(t, "b", key, []string{seed.Addr()}, nil)
	testwait.Within(t, 10*time.Second, "both members seen", func() bool { return rec.has(KindJoin, "a") && rec.has(KindJoin, "b") })
	if evs := rec.named("a"); evs[0].Meta.Node != "a" || evs[0].Meta.V != MetaVersion || evs[0].Addr != a.Addr() {
		t.Fatalf("join event %+v (a is at %s)", evs[0], a.Addr())
	}
	if len(seed.Members()) != 3 {
		t.Fatalf("members %+v", seed.Members())
	}

	// a can tell only the cores it knows that it leaves.
	testwait.For(t, "a to know the seed", func() bool {
		return slices.ContainsFunc(a.Members(), func(m Member) bool { return m.Name == "seed" })
	})
	a.Stop() // a graceful leave
	testwait.Within(t, 10*time.Second, "a's leave", func() bool { return rec.has(KindLeave, "a") })

	crash(t, b)
	testwait.Within(t, 15*time.Second, "b's failure", func() bool { return rec.has(KindFail, "b") })
	if rec.has(KindFail, "a") || rec.has(KindLeave, "b") {
		t.Fatalf("a leave told as a failure or the reverse: a %+v, b %+v", rec.named("a"), rec.named("b"))
	}
}

func TestAnotherKeyIsNeverAdmitted(t *testing.T) {
	t.Parallel()
	var rec recorder
	key := testKey(t)
	seed := member(t, "seed", key, nil, rec.handle)
	stranger := member(t, "stranger", testKey(t), []string{seed.Addr()}, nil)
	plain := member(t, "plain", nil, []string{seed.Addr()}, nil) // nil key: New would refuse it without Insecure
	_ = plain
	// A member with the right key, started after them, is seen: by then
	// the others have had their chance.
	member(t, "friend", key, []string{seed.Addr()}, nil)
	testwait.Within(t, 10*time.Second, "friend's join", func() bool { return rec.has(KindJoin, "friend") })
	testwait.Within(t, 10*time.Second, "the stranger trying", func() bool { return len(stranger.Members()) == 1 })
	if len(rec.named("stranger")) > 0 || len(rec.named("plain")) > 0 {
		t.Fatalf("a member without the key was admitted: %+v %+v", rec.named("stranger"), rec.named("plain"))
	}
	if n := len(seed.Members()); n != 2 {
		t.Fatalf("seed sees %d members, want 2", n)
	}
}

func TestRejoinsWhenTheSeedComesLate(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	// Reserve a port for the seed by starting and stopping a member on it.
	probe := member(t, "probe", key, nil, nil)
	addr := probe.Addr()
	probe.Stop()
	var rec recorder
	late := member(t, "late", key, []string{addr}, nil)
	s, err := New(Config{Name: "seed", BindAddr: addr, Key: key, Timing: fast, Meta: Meta{Role: RoleCore}, Handler: rec.handle})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	testwait.Within(t, 15*time.Second, "the late member to join the seed", func() bool { return rec.has(KindJoin, "late") })
	_ = late
}

func TestStopIsIdempotentAndFinal(t *testing.T) {
	t.Parallel()
	s := member(t, "x", nil, nil, nil)
	s.Stop()
	s.Stop()
	if err := s.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop = %v", err)
	}
	never, _ := New(Config{Name: "y", BindAddr: "127.0.0.1:0", Insecure: true})
	never.Stop() // before Start: returns at once
	if err := never.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop = %v", err)
	}
}

// TestNewStartsNothing: New makes no memberlist instance and starts no
// goroutine; Stop of a service never started returns at once; one started
// and stopped leaves no goroutine. Not parallel: it looks at every
// goroutine.
func TestNewStartsNothing(t *testing.T) {
	s, err := New(Config{Name: "idle", BindAddr: "127.0.0.1:0", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	testgoroutine.None(t, "shared/gossip.(*Service)")
	testgoroutine.None(t, "shared/gossip.New")
	testgoroutine.None(t, "hashicorp/memberlist.")
	if s.Addr() != "" || s.Members() != nil || s.Tell(RoleCore, Note{Leaving: "x"}) != 0 {
		t.Fatal("a service never started has an address, members or sends notes")
	}
	testgoroutine.Returns(t, 5*time.Second, "Stop before Start", s.Stop)

	run := member(t, "run", nil, nil, nil)
	if !testgoroutine.Running("shared/gossip.(*Service)") {
		t.Fatal("no goroutine of a started service")
	}
	run.Stop()
	testgoroutine.None(t, "shared/gossip.(*Service)")
}

func TestKindString(t *testing.T) {
	t.Parallel()
	got := fmt.Sprint(KindJoin, KindUpdate, KindLeave, KindFail)
	if got != "join update leave fail" {
		t.Fatal(got)
	}
}

// crash stops s as SIGKILL would: memberlist stops answering, nobody is told.
func crash(t testing.TB, s *Service) {
	t.Helper()
	s.mu.Lock()
	ml := s.ml
	s.ml, s.left = nil, true
	s.mu.Unlock()
	if err := ml.Shutdown(); err != nil {
		t.Fatal(err)
	}
	s.Base.Stop() // the goroutines end; nobody was told
}

// The leave intent travels over TCP and memberlist's leave over UDP: the
// disappearance can be seen first. It is then held for leaveGrace, and told
// as a leave when the intent follows; without an intent it is a failure.
func TestLeaveIntentArrivingAfterTheDisappearance(t *testing.T) {
	t.Parallel()
	var rec recorder
	s := &Service{cfg: Config{Name: "core", Handler: rec.handle}, q: newFIFO(),
		log: slog.New(slog.DiscardHandler)}
	d := &delegate{q: s.q, log: s.log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.loop(ctx, d) }()
	defer func() { cancel(); <-done }()

	secret := []byte("0123456789abcdef")
	meta := Meta{V: 1, Role: RoleAgent, Cluster: "c", Node: "late", Leave: leaveCommit(secret)}
	for _, name := range []string{"late", "crashed"} {
		b, _ := json.Marshal(meta)
		d.NotifyJoin(&memberlist.Node{Name: name, Meta: b})
	}
	s.q.push(Event{Kind: KindFail, Name: "late", Meta: meta, left: true})
	intent, _ := EncodeNote(Note{Leaving: "late", Proof: base64.RawURLEncoding.EncodeToString(secret)})
	d.NotifyMsg(intent)
	testwait.Within(t, 5*time.Second, "late's leave", func() bool { return rec.has(KindLeave, "late") })

	s.q.push(Event{Kind: KindFail, Name: "crashed", Meta: meta, left: true})
	testwait.Within(t, 5*time.Second, "crashed's failure", func() bool { return rec.has(KindFail, "crashed") })
	if rec.has(KindFail, "late") || rec.has(KindLeave, "crashed") {
		t.Fatalf("a leave told as a failure or the reverse: %+v", rec.evs)
	}
}

// A member the pool declared dead (memberlist's StateDead: its suspicion
// ran out) is told as a failure at once, not held for a leave intent that
// would have come seconds before: its failure comes before an event pushed
// after it about another member, which a held failure would follow.
func TestDeadMemberIsToldWithoutTheLeaveGrace(t *testing.T) {
	t.Parallel()
	var rec recorder
	s := &Service{cfg: Config{Name: "core", Handler: rec.handle}, q: newFIFO(),
		log: slog.New(slog.DiscardHandler)}
	d := &delegate{q: s.q, log: s.log}
	meta := Meta{V: 1, Role: RoleAgent, Cluster: "c", Node: "n"}
	b, _ := json.Marshal(meta)
	for _, name := range []string{"dead", "left"} {
		d.NotifyJoin(&memberlist.Node{Name: name, Meta: b})
	}
	// As memberlist reports them: the dead one by the pool, the one that
	// left by its own message, then another member joining.
	d.NotifyLeave(&memberlist.Node{Name: "dead", Meta: b, State: memberlist.StateDead})
	d.NotifyLeave(&memberlist.Node{Name: "left", Meta: b, State: memberlist.StateLeft})
	d.NotifyJoin(&memberlist.Node{Name: "other", Meta: b})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.loop(ctx, d) }()
	defer func() { cancel(); <-done }()
	testwait.Within(t, 5*time.Second, "both disappearances told", func() bool {
		return rec.has(KindFail, "dead") && rec.has(KindFail, "left")
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var order []string
	for _, ev := range rec.evs {
		if ev.Kind != KindJoin || ev.Name == "other" {
			order = append(order, ev.Kind.String()+" "+ev.Name)
		}
	}
	if want := []string{"fail dead", "join other", "fail left"}; !slices.Equal(order, want) {
		t.Fatalf("told %q, want %q: only the member that left by its own message waits for its intent", order, want)
	}
}

func TestReadKeyFileRefusesAFileOthersMayRead(t *testing.T) {
	t.Parallel()
	k, _ := GenerateKey()
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); !errors.Is(err, config.ErrFileOpen) || !strings.Contains(err.Error(), path+" has mode 0644") {
		t.Fatalf("ReadKeyFile of a 0644 file = %v", err)
	}
}

// A leave intent counts only for the member that sends it (issue 9, item
// 7): another key holder naming a member in an intent, before that member
// crashes, does not turn its failure into a leave. The member's own intent
// still makes its stop a leave.
func TestGossipLeaveIntentCountsOnlyForItsSender(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	var rec recorder
	seed := member(t, "seed", key, nil, rec.handle)
	victim := member(t, "victim", key, []string{seed.Addr()}, nil)
	rogue := member(t, "rogue", key, []string{seed.Addr()}, nil)
	leaver := member(t, "leaver", key, []string{seed.Addr()}, nil)
	testwait.Within(t, 10*time.Second, "three joins", func() bool {
		return rec.has(KindJoin, "victim") && rec.has(KindJoin, "rogue") && rec.has(KindJoin, "leaver")
	})
	var core *memberlist.Node
	testwait.Within(t, 10*time.Second, "the rogue to see the seed", func() bool {
		for _, n := range rogue.ml.Members() {
			if n.Name == "seed" {
				core = n
				return true
			}
		}
		return false
	})
	// The rogue knows the victim's announced commitment, not its secret.
	for _, proof := range []string{"", base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef")), rogue.leaveProof} {
		msg, _ := EncodeNote(Note{Leaving: "victim", Proof: proof})
		if err := rogue.ml.SendReliable(core, msg); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, victim)
	testwait.Within(t, 20*time.Second, "the victim's disappearance", func() bool {
		return rec.has(KindFail, "victim") || rec.has(KindLeave, "victim")
	})
	if rec.has(KindLeave, "victim") {
		t.Fatal("a rogue's intent made the victim's crash a leave")
	}
	leaver.Stop()
	testwait.Within(t, 20*time.Second, "the leaver's leave", func() bool {
		return rec.has(KindLeave, "leaver") || rec.has(KindFail, "leaver")
	})
	if !rec.has(KindLeave, "leaver") {
		t.Fatal("a member's own intent did not make its stop a leave")
	}
}

// The leave intents a core holds are bounded (issue 9, item 7): proven
// intents of more members than maxIntents leave at most maxIntents waiting,
// and intents without a proof are never kept.
func TestGossipPendingIntentsBounded(t *testing.T) {
	t.Parallel()
	d := &delegate{q: newFIFO(), log: slog.New(slog.DiscardHandler)}
	secret := []byte("0123456789abcdef")
	b, _ := json.Marshal(Meta{V: 1, Role: RoleAgent, Cluster: "c", Node: "n", Leave: leaveCommit(secret)})
	for i := range 3 * maxIntents {
		name := fmt.Sprintf("m%d", i)
		d.NotifyJoin(&memberlist.Node{Name: name, Meta: b})
		proven, _ := EncodeNote(Note{Leaving: name, Proof: base64.RawURLEncoding.EncodeToString(secret)})
		d.NotifyMsg(proven)
		forged, _ := EncodeNote(Note{Leaving: fmt.Sprintf("stranger%d", i)})
		d.NotifyMsg(forged)
	}
	d.mu.Lock()
	n := len(d.leaving)
	d.mu.Unlock()
	if n != maxIntents {
		t.Fatalf("%d intents held, want the bound %d", n, maxIntents)
	}
	if !d.said("m0") || d.said(fmt.Sprintf("m%d", 2*maxIntents)) || d.said("stranger0") {
		t.Fatal("the intents held are not the first proven ones")
	}
}
