package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/shared/testwait"
)

// hookReceiver is a real HTTP receiver of one destination: it checks each
// delivery's signature and records those it accepted, in arrival order.
type hookReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	fail   atomic.Bool // answer 500 while set
	tries  atomic.Int64
	// firstFail is when it first answered 500 (Unix ns; 0: never).
	firstFail atomic.Int64
	badSig    atomic.Int64

	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	id      string
	at      time.Time
	Seq     int64          `json:"seq"`
	TS      time.Time      `json:"ts"`
	Type    string         `json:"type"`
	Action  string         `json:"action_id"`
	RunID   string         `json:"run_id"`
	URL     string         `json:"url"`
	Data    map[string]any `json:"data"`
	Message string         `json:"message"`
}

func newHookReceiver(t *testing.T, secret string, handler func(w http.ResponseWriter, r *http.Request) bool) *hookReceiver {
	h := &hookReceiver{t: t, secret: secret}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.tries.Add(1)
		body, _ := io.ReadAll(r.Body)
		if handler != nil && !handler(w, r) {
			return
		}
		if h.fail.Load() {
			h.firstFail.CompareAndSwap(0, time.Now().UnixNano())
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		wh, err := standardwebhooks.NewWebhookRaw([]byte(secret))
		if err != nil || wh.Verify(body, r.Header) != nil {
			h.badSig.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		d := hookDelivery{id: r.Header.Get("webhook-id"), at: time.Now()}
		if err := json.Unmarshal(body, &d); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, d)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

// notifyYAML is the core's notify: section for receivers by name, each
// with its secret file in dir.
func notifyYAML(t *testing.T, dir string, dests map[string]*hookReceiver, events string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("notify_allow_loopback: true\nnotify:\n")
	for name, h := range dests {
		secret := filepath.Join(dir, name+".secret")
		if err := os.WriteFile(secret, []byte(h.secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - {name: %s, url: %q, format: json, secret_file: %q, events: %s}\n", name, h.srv.URL+"/in", secret, events)
	}
	return b.String()
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// uiPage signs in to the web UI with token and returns the status and body
// of page (a full URL).
func uiPage(t *testing.T, page, token string) (int, string) {
	t.Helper()
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	base := u.Scheme + "://" + u.Host
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRE.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no csrf in the sign-in page: %s", b)
	}
	resp, err = c.PostForm(base+"/ui/login", url.Values{"csrf": {string(m[1])}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An action waiting for approval, then a run that pauses on an error: the
// receiver gets approval.waiting for each and run.paused, each signed, each
// with a link to its working UI page.
func TestNotifyApprovalWaitingAndRunPausedSigned(t *testing.T) {
	t.Parallel()
	hook := newHookReceiver(t, "e2e-secret", nil)
	f := newStepFleet(t, 2, "0", notifyYAML(t, t.TempDir(), map[string]*hookReceiver{"oncall": hook},
		"[approval.waiting, run.paused]"))
	if err := os.WriteFile(f.failOn, []byte("node-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := f.create("node-1", "example.com/step", "{}")
	r := f.startRun(t, stepRun("1", "0", "pause"))
	f.waitRun(t, r.ID, 60*time.Second, "PAUSED")
	var got []hookDelivery
	testwait.Within(t, 20*time.Second, "approval.waiting of the action, of the run (created, paused) and run.paused", func() bool {
		got = hook.deliveries()
		return len(got) >= 4
	})
	var kinds []string
	for _, d := range got {
		key := d.Type
		switch {
		case d.Action == a.ID:
			key += " action"
		case d.RunID == r.ID:
			key += " run"
		}
		if d.Type == "approval.waiting" {
			key += " " + fmt.Sprint(d.Data["reason"])
		}
		kinds = append(kinds, key)
	}
	want := "approval.waiting action created,approval.waiting run created,run.paused run,approval.waiting run paused"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("deliveries %v, want %s", kinds, want)
	}
	if n := hook.badSig.Load(); n != 0 {
		t.Fatalf("%d deliveries failed the signature check", n)
	}
	for _, d := range []hookDelivery{got[0], got[2]} {
		status, body := uiPage(t, d.URL, f.secrets["alice"])
		id := a.ID
		if d.RunID != "" {
			id = r.ID
		}
		if status != http.StatusOK || !strings.Contains(body, id) {
			t.Errorf("UI link %s: %d, want the page of %s", d.URL, status, id)
		}
	}
}

// The receiver answers 500 for 20 s from its first refused delivery, then
// recovers: once the head of the queue is tried again (within the longest
// wait the backoff gives after 20 s of failures), the backlog follows at
// once. Later the core is SIGKILLed with deliveries pending. Every event
// arrives, in order, none twice by webhook-id, none lost.
func TestNotifyEveryEventInOrderThroughFailuresAndACoreSIGKILL(t *testing.T) {
	t.Parallel()
	hook := newHookReceiver(t, "e2e-secret", nil)
	f := newFleet(t, 1, notifyYAML(t, t.TempDir(), map[string]*hookReceiver{"oncall": hook}, "['action.*', approval.waiting]"))
	hook.fail.Store(true)
	var ids []string
	for range 5 {
		ids = append(ids, f.create("node-1", "example.com/append", "{}").ID)
	}
	// Five creations and five approval.waiting: the first refused, then
	// tried again with backoff (1 s doubling, jitter) for 20 s.
	testwait.Within(t, 30*time.Second, "tries refused", func() bool { return hook.tries.Load() >= 3 })
	const failFor = 20 * time.Second
	testwait.Within(t, 30*time.Second, "20 s of failures from the first refused delivery", func() bool {
		first := hook.firstFail.Load()
		return first != 0 && time.Since(time.Unix(0, first)) >= failFor
	})
	hook.fail.Store(false)
	recovered := time.Now()
	refused := hook.tries.Load()
	// After 20 s of failures at most 6 tries were made (the earliest at
	// 0, 0.5, 1.5, 3.5, 7.5 and 15.5 s), so the next one waits at most
	// 32 s; the rest of the queue follows it at once.
	const longestWait = 32 * time.Second
	testwait.Within(t, longestWait+15*time.Second, "ten deliveries after the receiver recovered", func() bool {
		return len(hook.deliveries()) >= 10
	})
	first := hook.deliveries()
	t.Logf("%d tries refused in %s; first delivery %s after the recovery, the tenth %s after the first",
		refused, failFor, first[0].at.Sub(recovered).Round(time.Millisecond), first[9].at.Sub(first[0].at).Round(time.Millisecond))
	if lag := first[9].at.Sub(first[0].at); lag > 5*time.Second {
		t.Errorf("the backlog took %s to follow its head after the recovery, want it at once", lag)
	}

	// Deliveries pending when the core is killed.
	hook.fail.Store(true)
	tries := hook.tries.Load()
	for range 3 {
		ids = append(ids, f.create("node-1", "example.com/append", "{}").ID)
	}
	testwait.Within(t, 30*time.Second, "a refused try after the new events", func() bool { return hook.tries.Load() > tries })
	f.core.kill()
	hook.fail.Store(false)
	f.core.restart()
	testwait.Within(t, 60*time.Second, "sixteen deliveries after the restart", func() bool { return len(hook.deliveries()) >= 16 })

	got := hook.deliveries()
	seen := map[string]bool{}
	var last int64
	perAction := map[string][]string{}
	for _, d := range got {
		if seen[d.id] {
			t.Errorf("webhook-id %s accepted twice", d.id)
		}
		seen[d.id] = true
		if d.Seq <= last {
			t.Errorf("event %d delivered after event %d: out of order", d.Seq, last)
		}
		last = d.Seq
		perAction[d.Action] = append(perAction[d.Action], d.Type)
	}
	for _, id := range ids {
		if strings.Join(perAction[id], ",") != "action.created,approval.waiting" {
			t.Errorf("action %s: deliveries %v, want action.created then approval.waiting", id, perAction[id])
		}
	}
	if hook.badSig.Load() != 0 {
		t.Errorf("%d deliveries failed the signature check", hook.badSig.Load())
	}
}

// A receiver that sleeps 30 s does not delay a second destination.
func TestNotifySlowReceiverDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := newHookReceiver(t, "slow-secret", func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		return true
	})
	t.Cleanup(func() { close(release) })
	fast := newHookReceiver(t, "fast-secret", nil)
	f := newFleet(t, 1, notifyYAML(t, t.TempDir(), map[string]*hookReceiver{"slow": slow, "fast": fast}, "[approval.waiting]"))
	var worst time.Duration
	for i := range 3 {
		a := f.create("node-1", "example.com/append", "{}")
		testwait.Within(t, 5*time.Second, "the fast receiver has the approval.waiting", func() bool { return len(fast.deliveries()) == i+1 })
		d := fast.deliveries()[i]
		if d.Action != a.ID {
			t.Fatalf("fast receiver got %+v, want the approval.waiting of %s", d, a.ID)
		}
		worst = max(worst, d.at.Sub(d.TS))
	}
	t.Logf("event committed → delivered to the fast receiver, worst of 3 with a slow one beside it: %s", worst)
	if worst > time.Second {
		t.Fatalf("the fast receiver waited %s behind the slow one, want at most 1 s", worst)
	}
}

// outboxHolder returns the index of the core replica holding the outbox's
// lease (-1: none, or no answer).
func (f *fleet) outboxHolder() int {
	rs, err := f.admin.Replicas(ctxT(f.t))
	if err != nil {
		return -1
	}
	for _, r := range rs.Replicas {
		for _, l := range r.Leases {
			if l.ClusterID != "~notify" || !r.Live {
				continue
			}
			for i, c := range f.cores {
				if c.Addr() == r.Addr {
					return i
				}
			}
		}
	}
	return -1
}

// With three replicas on PostgreSQL, the one delivering is SIGKILLed: the
// outbox moves with its lease and the receiver gets every event, in order
// of first arrival, repeats only under the same webhook-id.
func TestNotifyOutboxMovesWithItsLeaseOnFailover(t *testing.T) {
	t.Parallel()
	// A receiver taking 100 ms per delivery, so that the kill lands while
	// deliveries are pending.
	hook := newHookReceiver(t, "e2e-secret", func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
		}
		return true
	})
	f := newFleetWith(t, fleetOptions{nodes: 1, replicas: 3,
		coreExtra: notifyYAML(t, t.TempDir(), map[string]*hookReceiver{"oncall": hook}, "['action.created', approval.waiting]")})
	var holder int
	testwait.Within(t, 20*time.Second, "a replica holding the outbox", func() bool { holder = f.outboxHolder(); return holder >= 0 })
	f.use((holder + 1) % len(f.cores))
	var ids []string
	for range 10 {
		ids = append(ids, f.create("node-1", "example.com/append", "{}").ID)
	}
	testwait.Within(t, 20*time.Second, "the first deliveries", func() bool { return len(hook.deliveries()) >= 2 })
	f.cores[holder].kill()
	for range 5 {
		ids = append(ids, f.create("node-1", "example.com/append", "{}").ID)
	}
	testwait.Within(t, 60*time.Second, "every event delivered after the failover", func() bool {
		seen := map[string]bool{}
		for _, d := range hook.deliveries() {
			seen[d.id] = true
		}
		return len(seen) >= 2*len(ids)
	})
	if h := f.outboxHolder(); h == holder || h < 0 {
		t.Errorf("outbox held by replica %d after replica %d was killed", h, holder)
	}
	first := map[string]bool{}
	perAction := map[string][]string{}
	var last int64
	repeats := 0
	for _, d := range hook.deliveries() {
		if first[d.id] {
			repeats++
			continue
		}
		first[d.id] = true
		if d.Seq <= last {
			t.Errorf("event %d first delivered after event %d", d.Seq, last)
		}
		last = d.Seq
		perAction[d.Action] = append(perAction[d.Action], d.Type)
	}
	for _, id := range ids {
		if strings.Join(perAction[id], ",") != "action.created,approval.waiting" {
			t.Errorf("action %s: deliveries %v", id, perAction[id])
		}
	}
	t.Logf("%d deliveries, %d of them repeats under the same webhook-id", len(hook.deliveries()), repeats)
}
