package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/testwait"
)

// The specification's published test vector.
func TestSignMatchesTheSpecificationVector(t *testing.T) {
	t.Parallel()
	secret, err := LoadSecret(writeSecret(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0o600))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := Sign(h, secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("webhook-signature"), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
	if h.Get("webhook-timestamp") != "1614265330" || h.Get("webhook-id") != "msg_p5jXN8AQM9LWM0D4loKWxJek" {
		t.Errorf("headers = %v", h)
	}
}

func writeSecret(t *testing.T, s string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateNamesEachBadField(t *testing.T) {
	t.Parallel()
	good := writeSecret(t, "s3cret", 0o600)
	open := writeSecret(t, "s3cret", 0o644)
	dests := []Destination{
		{Name: "ok", URL: "https://hooks.example.com/x", Format: "json", SecretFile: good, Events: []string{"run.*"}, Clusters: []string{"prod-*"}},
		{Name: "a", URL: "http://hooks.example.com/x", Format: "xml", SecretFile: open, Events: []string{"nothing.*"}, Clusters: []string{"dev"}},
		{Name: "b", URL: "https://127.0.0.1/hook?token=TOPSECRET", Format: "slack", SecretFile: "/nonexistent/secret", Events: []string{"[bad"}},
		{Name: "ok", URL: "", Format: "json"},
	}
	errs := Validate(dests, false, Known{Clusters: []string{"prod-1"}})
	got := map[string]string{}
	for _, e := range errs {
		s := e.Error()
		key, _, _ := strings.Cut(s, ":")
		got[key] = s
	}
	for _, key := range []string{"notify[1].url", "notify[1].format", "notify[1].secret_file", "notify[1].events[0]",
		"notify[1].clusters[0]", "notify[2].url", "notify[2].secret_file", "notify[2].events[0]", "notify[3].name",
		"notify[3].url", "notify[3].secret_file"} {
		if got[key] == "" {
			t.Errorf("no error for %s; got %v", key, errs)
		}
	}
	for key, e := range got {
		if strings.HasPrefix(key, "notify[0]") {
			t.Errorf("error for the good destination: %s", e)
		}
		if strings.Contains(e, "TOPSECRET") {
			t.Errorf("error shows the URL's secret: %s", e)
		}
	}
	if len(errs) != 11 {
		t.Errorf("%d errors, want 11: %v", len(errs), errs)
	}
	if errs := Validate(dests[2:3], true, Known{}); len(errs) != 2 { // loopback allowed: secret and glob remain
		t.Errorf("with loopback allowed: %v, want the secret and glob errors alone", errs)
	}
	many := make([]Destination, store.MaxDestinations+1) // a delivery's id has room for MaxDestinations
	for i := range many {
		many[i] = Destination{Name: fmt.Sprintf("d%d", i), URL: "https://hooks.example.com/x", Format: "slack"}
	}
	if errs := Validate(many, false, Known{Dynamic: true}); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "notify:") {
		t.Errorf("%d destinations: %v, want one error, for notify", len(many), errs)
	}
	if errs := Validate(many[:store.MaxDestinations], false, Known{Dynamic: true}); len(errs) != 0 {
		t.Errorf("%d destinations: %v, want none", store.MaxDestinations, errs)
	}
}

func TestRouteByEventAndCluster(t *testing.T) {
	t.Parallel()
	route := Route([]Destination{
		{Name: "all"},
		{Name: "prod", Events: []string{"run.*", "approval.waiting"}, Clusters: []string{"prod-*"}},
	})
	for _, tc := range []struct {
		e    store.Event
		want string
	}{
		{store.Event{Type: "run.paused", ClusterID: "prod-1"}, "all,prod"},
		{store.Event{Type: "run.paused", ClusterID: "dev"}, "all"},
		{store.Event{Type: "node.down", ClusterID: "prod-1"}, "all"},
		{store.Event{Type: "approval.waiting"}, "all,prod"},
		{store.Event{Type: "notify.dead", Data: map[string]any{"destination": "other"}}, "all"},
		{store.Event{Type: "notify.dead", Data: map[string]any{"destination": "all"}}, ""},
		{store.Event{Type: "run.paused", ClusterID: "prod-1"}, "all,prod"}, // remembered
	} {
		if got := strings.Join(route(&tc.e), ","); got != tc.want {
			t.Errorf("route(%s in %q) = %q, want %q", tc.e.Type, tc.e.ClusterID, got, tc.want)
		}
	}
}

func TestSlackTextIsOneEscapedLine(t *testing.T) {
	t.Parallel()
	e := &store.Event{Type: "run.paused", ClusterID: "prod", NodeID: "n1", Actor: "alice",
		Message: "stage <b> failed:\n" + strings.Repeat("x", 500) + " &\u202e"}
	got := SlackText(e, "https://muster.example.com/ui/runs/r1")
	if strings.ContainsAny(got, "\n") || strings.Contains(got, "<b>") || strings.Contains(got, "\u202e") {
		t.Errorf("text not escaped to one line: %q", got)
	}
	if !strings.Contains(got, "&lt;b&gt;") || !strings.Contains(got, " on prod/n1 by alice <https://muster.example.com/ui/runs/r1|open>") {
		t.Errorf("text = %q", got)
	}
	if len(got) > 400 {
		t.Errorf("text not cut: %d bytes", len(got))
	}
}

func TestBackoffDoublesWithJitterUpToTheMaximum(t *testing.T) {
	t.Parallel()
	for tries, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 30: time.Hour} {
		for range 50 {
			if got := Backoff(tries, time.Second, time.Hour); got < want/2 || got > want {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", tries, got, want/2, want)
			}
		}
	}
}

// receiver is a real HTTP receiver that records what it accepted.
type receiver struct {
	mu     sync.Mutex
	ids    []string
	types  []string
	seqs   []int64
	fail   atomic.Int32 // answer 500 while > 0, counting down
	status atomic.Int32 // when set, always answer this
	srv    *httptest.Server
	secret atomic.Pointer[string] // the secret it verifies with
	bad    atomic.Int32
	tries  atomic.Int32
}

func newReceiver(t *testing.T, secret string) *receiver {
	rc := &receiver{}
	rc.secret.Store(&secret)
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.tries.Add(1)
		body, _ := io.ReadAll(r.Body)
		if s := rc.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		if rc.fail.Add(-1) >= 0 {
			w.WriteHeader(500)
			return
		}
		wh, _ := standardwebhooks.NewWebhookRaw([]byte(*rc.secret.Load()))
		if err := wh.Verify(body, r.Header); err != nil {
			rc.bad.Add(1)
			w.WriteHeader(400)
			return
		}
		var p Payload
		_ = json.Unmarshal(body, &p)
		rc.mu.Lock()
		rc.ids = append(rc.ids, r.Header.Get("webhook-id"))
		rc.types = append(rc.types, p.Type)
		rc.seqs = append(rc.seqs, p.Seq)
		rc.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() ([]string, []int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...), append([]int64(nil), rc.seqs...)
}

type setupOut struct {
	st *sqlite.Store
	w  *Worker
}

func setup(t *testing.T, dests []Destination) setupOut {
	t.Helper()
	return setupWith(t, Config{Destinations: dests, PublicURL: "https://muster.example.com", AllowLoopback: true,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Poll: 200 * time.Millisecond})
}

// setupWith is setup with a worker configured as cfg.
func setupWith(t *testing.T, cfg Config) setupOut {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.SetOutbox(Route(cfg.Destinations))
	w, err := New(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return setupOut{st, w}
}

func appendEvents(t *testing.T, st store.Store, n int, typ string) []int64 {
	t.Helper()
	var seqs []int64
	for i := range n {
		if err := st.Update(context.Background(), func(tx store.Tx) error {
			e := &store.Event{Type: typ, Actor: "core", ClusterID: "c1", Message: strings.Repeat("m", i)}
			err := tx.AppendEvent(context.Background(), e)
			seqs = append(seqs, e.Seq)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return seqs
}

func TestFailingReceiverGetsEveryEventInOrderOnce(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s3cret")
	rc.fail.Store(6)
	s := setup(t, []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s3cret", 0o600)}})
	want := appendEvents(t, s.st, 10, "run.paused")
	testwait.For(t, "ten deliveries", func() bool { ids, _ := rc.got(); return len(ids) >= 10 })
	ids, seqs := rc.got()
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			t.Errorf("webhook-id %s delivered twice", id)
		}
		seen[id] = true
		if seqs[i] != want[i] || id != MessageID(want[i], "hook") {
			t.Errorf("delivery %d = event %d (%s), want event %d in order", i, seqs[i], id, want[i])
		}
	}
	if rc.bad.Load() != 0 {
		t.Errorf("%d deliveries failed the signature check", rc.bad.Load())
	}
}

func TestClientErrorIsDeadAfterThreeTriesAndSaysSo(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	rc.status.Store(404)
	s := setup(t, []Destination{{Name: "hook", URL: rc.srv.URL + "/hook?key=TOPSECRET", Format: FormatSlack}})
	seqs := appendEvents(t, s.st, 1, "node.down")
	var d store.Delivery
	testwait.For(t, "the delivery dead", func() bool {
		_ = s.st.Read(context.Background(), func(r store.Reader) error {
			ds, err := r.Deliveries(context.Background(), store.DeliveryQuery{Destination: "hook"})
			if err == nil && len(ds) == 1 {
				d = ds[0]
			}
			return err
		})
		return d.State == store.DeliveryDead
	})
	if d.Attempts != ClientErrorTries || d.LastStatus != 404 || d.EventSeq != seqs[0] {
		t.Errorf("dead delivery = %+v, want 3 tries ending in 404", d)
	}
	var dead *store.Event
	_ = s.st.Read(context.Background(), func(r store.Reader) error {
		evs, err := r.Events(context.Background(), seqs[0], 10)
		for i := range evs {
			if evs[i].Type == store.EventNotifyDead {
				dead = &evs[i]
			}
		}
		return err
	})
	if dead == nil || dead.Data["destination"] != "hook" || strings.Contains(dead.Message, "TOPSECRET") {
		t.Errorf("notify.dead event = %+v", dead)
	}
}

func TestSlowReceiverDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	fast := newReceiver(t, "s")
	s := setup(t, []Destination{
		{Name: "slow", URL: slow.URL, Format: FormatSlack},
		{Name: "fast", URL: fast.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s", 0o600)},
	})
	start := time.Now()
	appendEvents(t, s.st, 3, "run.paused")
	testwait.Within(t, time.Second, "three deliveries to the fast receiver", func() bool {
		ids, _ := fast.got()
		return len(ids) == 3
	})
	t.Logf("fast receiver had all three after %s", time.Since(start))
}

func TestDialRefusesLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	c := NewClient(time.Second, false)
	resp, err := c.Post(rc.srv.URL, "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("posted to a loopback receiver without notify_allow_loopback")
	}
	if !errors.Is(err, gossip.ErrInternalAddr) {
		t.Errorf("refused with %v, want the dial-time refusal", err)
	}
}

func TestNoRedirectsAndAnswersCapped(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(redirect.Close)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, MaxAnswer+10))
	}))
	t.Cleanup(big.Close)
	w, err := New(Config{AllowLoopback: true}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &store.Event{Seq: 1, Type: "x"}
	if r := w.send(context.Background(), sender{Destination{Name: "r", URL: redirect.URL, Format: FormatSlack}, nil, w.client}, e, "id", time.Now()); r.OK() || r.Status != 302 || hits.Load() != 0 {
		t.Errorf("redirect: %+v, %d hits on its target; want a failed 302, none", r, hits.Load())
	}
	if r := w.send(context.Background(), sender{Destination{Name: "b", URL: big.URL, Format: FormatSlack}, nil, w.client}, e, "id", time.Now()); r.OK() || r.Err != "answer over 64 KiB" {
		t.Errorf("big answer: %+v, want a failure", r)
	}
}

func TestOnlyTheLeaseHolderDelivers(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dests := []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s", 0o600)}}
	st.SetOutbox(Route(dests))
	var held atomic.Bool
	var asked atomic.Int32
	var leaseCtx context.Context
	var lose context.CancelFunc
	var mu sync.Mutex
	w, err := New(Config{Destinations: dests, AllowLoopback: true, Poll: 20 * time.Millisecond,
		Lease: func(ctx context.Context) (context.Context, context.CancelFunc, bool) {
			if !held.Load() {
				asked.Add(1)
				return nil, nil, false
			}
			mu.Lock()
			defer mu.Unlock()
			leaseCtx, lose = context.WithCancel(ctx)
			return leaseCtx, lose, true
		}}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	appendEvents(t, st, 2, "node.down")
	// Not holding the lease: the worker asks for it again and again (one
	// asking per destination loop), and sends nothing.
	testwait.For(t, "the lease asked for five times", func() bool { return asked.Load() >= 5 })
	if ids, _ := rc.got(); len(ids) != 0 {
		t.Fatalf("delivered %v without the lease", ids)
	}
	held.Store(true)
	testwait.For(t, "both delivered once the lease is held", func() bool { ids, _ := rc.got(); return len(ids) == 2 })
}

func TestMetricsCountResultsAndTheBacklog(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	rc.status.Store(503)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dests := []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatSlack}}
	st.SetOutbox(Route(dests))
	reg := prometheus.NewRegistry()
	w, err := New(Config{Destinations: dests, AllowLoopback: true, MinBackoff: time.Hour, MaxBackoff: time.Hour}, st, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, 3, "node.down")
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// gauge returns the value of one series of reg, by metric name and
	// destination label.
	gauge := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				if mf.GetName() != name || len(m.Label) == 0 || m.Label[0].GetValue() != "hook" {
					continue
				}
				if len(m.Label) == 2 && m.Label[1].GetValue() != "failed" {
					continue
				}
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	testwait.For(t, "one failed try", func() bool { return gauge("muster_notify_deliveries_total") == 1 })
	if got := gauge("muster_notify_backlog"); got != 3 {
		t.Errorf("backlog %v, want 3", got)
	}
	if got := gauge("muster_notify_oldest_pending_seconds"); got <= 0 {
		t.Errorf("oldest pending age %v, want above 0", got)
	}
}

// FuzzParseSecret: a secret file's text gives a non-empty key or an error,
// and a whsec_ secret gives its decoded bytes.
func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "s3cret\n", "", " \n", "whsec_", "whsec_!!",
		"whsec_YQ==", "whsec_YQ", "\x00", "whsec_" + strings.Repeat("A", 4096)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		key, err := parseSecret(text)
		if err == nil && len(key) == 0 {
			t.Fatalf("parseSecret(%q) gave an empty key", text)
		}
	})
}

func TestSecretFileRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		mode       os.FileMode
		want       string
	}{
		{"group readable", "s", 0o640, "chmod 600"},
		{"empty", " \n", 0o600, "empty"},
		{"bad base64", "whsec_!!", 0o600, "not base64"},
	} {
		if _, err := LoadSecret(writeSecret(t, tc.text, tc.mode)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestPageURLLeadsToTheRunTheActionOrTheSchedule(t *testing.T) {
	t.Parallel()
	const base = "https://muster.example.com/"
	for want, e := range map[string]*store.Event{
		base + "ui/runs/r1":         {RunID: "r1", Data: map[string]any{"schedule": "nightly"}},
		base + "ui/actions/a1":      {ActionID: "a1"},
		base + "ui/schedules/a%2Fb": {Type: store.EventApprovalWaiting, Data: map[string]any{"schedule": "a/b"}},
		base + "ui/events":          {Type: store.EventNodeDown},
	} {
		if got := PageURL(base, e); got != want {
			t.Errorf("PageURL(%+v) = %s, want %s", e, got, want)
		}
	}
}

// unrecorded is a store whose write transactions fail while kill is set: a
// worker on it sends, then cannot record what it sent, as a core killed
// between the two.
type unrecorded struct {
	store.Store
	kill atomic.Bool
}

func (u *unrecorded) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if u.kill.Load() {
		return errors.New("killed before recording")
	}
	return u.Store.Update(ctx, fn)
}

func TestSentButNotRecordedIsSentAgainWithTheSameID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newReceiver(t, "s3cret")
	dests := []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s3cret", 0o600)}}
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.SetOutbox(Route(dests))
	cfg := Config{Destinations: dests, AllowLoopback: true, Poll: 100 * time.Millisecond}
	start := func(s store.Store) *Worker {
		w, err := New(cfg, s, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	u := &unrecorded{Store: st}
	u.kill.Store(true)
	first := start(u)
	want := appendEvents(t, st, 5, "run.paused")
	testwait.For(t, "the five events sent", func() bool { ids, _ := rc.got(); return len(ids) >= len(want) })
	first.Stop()
	pending := func() int { return pendingTo(t, st, "hook") }
	if n := pending(); n != len(want) {
		t.Fatalf("%d deliveries pending after sending without recording, want %d", n, len(want))
	}
	sentBefore, _ := rc.got()
	start(st)
	testwait.For(t, "every delivery recorded", func() bool { return pending() == 0 })
	ids, seqs := rc.got()
	for i, id := range ids {
		if id != MessageID(seqs[i], "hook") {
			t.Errorf("event %d sent with webhook-id %s, want %s every time", seqs[i], id, MessageID(seqs[i], "hook"))
		}
	}
	// The one try the first worker had in flight when it stopped may
	// land after it stopped, anywhere among the second's (at least once):
	// without it, what arrived is every event again, in order.
	again := seqs[len(sentBefore):]
	ok := slices.Equal(again, want)
	for i := range again {
		if len(again) == len(want)+1 && slices.Equal(slices.Delete(slices.Clone(again), i, i+1), want) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("after the restart, sent events %v, want every one again in order, %v (and at most one late try of the first worker)", again, want)
	}
}

// TestAnIdleDestinationsCursorFollowsTheLog: a destination that takes few
// events has its cursor moved up to the newest event once it lags by
// skipEvery with nothing pending, so that looking for its next delivery
// does not read every event since its last; its next delivery still goes.
func TestAnIdleDestinationsCursorFollowsTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rare, busy := newReceiver(t, "s3cret"), newReceiver(t, "s3cret")
	secret := writeSecret(t, "s3cret", 0o600)
	s := setup(t, []Destination{
		{Name: "rare", URL: rare.srv.URL, Format: FormatJSON, SecretFile: secret, Events: []string{"run.failed"}},
		{Name: "busy", URL: busy.srv.URL, Format: FormatJSON, SecretFile: secret, Events: []string{"run.paused"}}})
	first := appendEvents(t, s.st, 1, "run.failed")
	var latest int64
	if err := s.st.Update(ctx, func(tx store.Tx) error {
		for range skipEvery + 10 {
			e := &store.Event{Type: "run.paused", Actor: "core", ClusterID: "c1"}
			if err := tx.AppendEvent(ctx, e); err != nil {
				return err
			}
			latest = e.Seq
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cursor := func(name string) int64 {
		var c []store.Cursor
		if err := s.st.Read(ctx, func(r store.Reader) error {
			var err error
			c, err = r.(store.OutboxRows).Cursors(ctx, name)
			return err
		}); err != nil || len(c) != 1 {
			t.Fatalf("cursor of %s: %+v, %v", name, c, err)
		}
		return c[0].Seq
	}
	testwait.For(t, "the rare destination's cursor at the newest event", func() bool { return cursor("rare") >= latest })
	testwait.For(t, "every busy delivery", func() bool { ids, _ := busy.got(); return len(ids) == skipEvery+10 })
	if _, seqs := rare.got(); !slices.Equal(seqs, first) {
		t.Errorf("the rare destination got %v, want %v", seqs, first)
	}
	next := appendEvents(t, s.st, 1, "run.failed")
	testwait.For(t, "the rare destination's next delivery", func() bool { _, seqs := rare.got(); return len(seqs) == 2 })
	if _, seqs := rare.got(); seqs[1] != next[0] {
		t.Errorf("the rare destination's second delivery is event %d, want %d", seqs[1], next[0])
	}
}

// TestRecentKeepsEventsAndBodiesOnce: an event read once is found by the
// next destination's step without reading the store, its body rendered
// once per format, and both are dropped once recentSpan behind.
func TestRecentKeepsEventsAndBodiesOnce(t *testing.T) {
	c := newRecent()
	e := &store.Event{Seq: 5, Type: "run.paused", Actor: "core"}
	c.add(map[int64]*store.Event{5: e, 6: nil})
	events := map[int64]*store.Event{}
	missing := c.fill([]store.Delivery{{EventSeq: 5}, {EventSeq: 6}, {EventSeq: 7}}, events)
	if events[5] != e || len(missing) != 2 || missing[0].EventSeq != 6 || missing[1].EventSeq != 7 {
		t.Fatalf("fill = %v, missing %v, want event 5 kept, 6 (not stored) and 7 missing", events, missing)
	}
	b1, err := c.body(FormatJSON, "https://m.example.com", e)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := c.body(FormatJSON, "https://m.example.com", e)
	if &b1[0] != &b2[0] {
		t.Error("the body was rendered twice")
	}
	if s, _ := c.body(FormatSlack, "https://m.example.com", e); string(s) == string(b1) {
		t.Error("the slack body is the json one")
	}
	c.add(map[int64]*store.Event{5 + recentSpan: {Seq: 5 + recentSpan}})
	if got := c.fill([]store.Delivery{{EventSeq: 5}}, map[int64]*store.Event{}); len(got) != 1 {
		t.Error("event 5 still kept recentSpan behind the newest")
	}
	if len(c.bodies) != 0 {
		t.Errorf("%d bodies kept recentSpan behind the newest, want none", len(c.bodies))
	}
	// A destination catching up reads old events: they are not kept.
	old := map[int64]*store.Event{}
	for seq := range int64(2 * recentSpan) {
		old[seq+1] = &store.Event{Seq: seq + 1}
	}
	c.add(old)
	if len(c.events) > recentSpan {
		t.Errorf("%d events kept after reading old ones, want at most %d", len(c.events), recentSpan)
	}
}

// TestANewEventWakesADestinationAfterItsBackoff: while its head waits for
// the next try a destination ignores new events, but once that try is
// made, the next event wakes it at once, not at its next poll.
func TestANewEventWakesADestinationAfterItsBackoff(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s3cret")
	rc.fail.Store(1)
	dests := []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s3cret", 0o600)}}
	st := setupWith(t, Config{Destinations: dests, AllowLoopback: true, MinBackoff: 50 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, Poll: time.Hour, Linger: time.Millisecond}).st
	pending := func() int { return pendingTo(t, st, "hook") }
	want := appendEvents(t, st, 1, "run.paused")
	testwait.For(t, "the first event, after one failed try", func() bool { return pending() == 0 })
	// Each next event comes once the last is recorded, when the loop
	// waits with nothing to send: only the event's wake can start it
	// before the hour's poll.
	for i := range 3 {
		want = append(want, appendEvents(t, st, 1, "run.failed")...)
		testwait.For(t, fmt.Sprintf("event %d, well before the next poll", i+2), func() bool { return pending() == 0 })
	}
	if _, seqs := rc.got(); !slices.Equal(seqs, want) {
		t.Errorf("received %v, want %v", seqs, want)
	}
}

// TestADeadHeadMovesTheCursorPastIt: a delivery given up at the head of
// its queue moves its destination's cursor past it, and stays dead.
func TestADeadHeadMovesTheCursorPastIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newReceiver(t, "s3cret")
	rc.status.Store(404)
	s := setup(t, []Destination{{Name: "hook", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s3cret", 0o600)}})
	seqs := appendEvents(t, s.st, 1, "run.paused")
	var dead []store.Delivery
	testwait.For(t, "the delivery dead", func() bool {
		if err := s.st.Read(ctx, func(r store.Reader) error {
			var err error
			dead, err = r.Deliveries(ctx, store.DeliveryQuery{Destination: "hook", State: store.DeliveryDead})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return len(dead) == 1
	})
	if err := s.st.Read(ctx, func(r store.Reader) error {
		c, err := r.(store.OutboxRows).Cursors(ctx, "hook")
		if err == nil && (len(c) != 1 || c[0].Seq < seqs[0]) {
			t.Errorf("cursor = %+v, want at or past event %d", c, seqs[0])
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if dead[0].EventSeq != seqs[0] || dead[0].Attempts != ClientErrorTries {
		t.Errorf("dead = %+v, want event %d after %d tries", dead[0], seqs[0], ClientErrorTries)
	}
}

// pendingTo counts the pending deliveries to a destination (up to 1000).
func pendingTo(t *testing.T, st store.Store, dest string) int {
	t.Helper()
	ctx := context.Background()
	var ds []store.Delivery
	if err := st.Read(ctx, func(r store.Reader) error {
		var err error
		ds, err = r.PendingDeliveries(ctx, dest, 1000)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return len(ds)
}

// Issue 30, item 6: an IPv6 literal with a zone (`[::1%25lo]`,
// `[fe80::1%25eth0]`) is loopback or link-local all the same, both when
// the configuration is checked and when the address is dialled. The
// dial-time control is called as the dialler calls it, with the address
// it is about to connect to, so no listener and no IPv6 are needed; an
// IPv4-mapped literal with a zone is dialled over IPv4, where the control
// sees "127.0.0.1%lo", which the client must refuse before connecting.
func TestZonedIPv6LiteralsAreRefusedLikeTheirAddress(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"https://[::1%25lo]:8443/hook", "https://[fe80::1%25eth0]/hook", "https://[::ffff:127.0.0.1%25lo]/hook"} {
		errs := Validate([]Destination{{Name: "d", URL: raw, Format: FormatSlack}}, false, Known{Dynamic: true})
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), "loopback or link-local") {
			t.Errorf("Validate(%s) = %v, want a loopback or link-local refusal", raw, errs)
		}
	}
	for _, addr := range []string{"[::1%lo]:1", "[fe80::1%eth0]:443", "127.0.0.1%lo:1"} {
		if err := gossip.RefuseInternal("tcp", addr, nil); !errors.Is(err, gossip.ErrInternalAddr) {
			t.Errorf("the dial-time control on %s: %v, want ErrInternalAddr", addr, err)
		}
	}
	c := NewClient(time.Second, false)
	resp, err := c.Post("http://[::ffff:127.0.0.1%25lo]:1/hook", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, gossip.ErrInternalAddr) {
		t.Errorf("posting to [::ffff:127.0.0.1%%25lo]: %v, want the dial-time refusal", err)
	}
}
