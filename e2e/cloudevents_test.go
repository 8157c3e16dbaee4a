package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// ceFollower is `muster events --follow -o cloudevents` as a log shipper
// runs it: a real process appending to a file, started again after it ends
// with --since the id of the last line it wrote.
type ceFollower struct {
	t    *testing.T
	f    *fleet
	path string
	cmd  *exec.Cmd
	done chan error
}

func (c *ceFollower) start(since string) {
	c.t.Helper()
	out, err := os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	args := []string{"events", "--follow", "-o", "cloudevents", "--limit", "1000"}
	if since != "" {
		args = append(args, "--since", since)
	} else {
		args = append(args, "--since", "0")
	}
	c.cmd = exec.Command(binary, args...)
	c.cmd.Env = append(os.Environ(), "MUSTER_ADDR=http://"+c.f.core.Addr(), "MUSTER_TOKEN="+c.f.secrets["admin"])
	c.cmd.Stdout = out
	var stderr bytes.Buffer
	c.cmd.Stderr = &stderr
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.done = make(chan error, 1)
	go func() { err := c.cmd.Wait(); out.Close(); c.done <- err }()
	c.t.Cleanup(func() { _ = c.cmd.Process.Kill() })
}

// lines reads the CloudEvents written so far; a last line cut short (the
// process was writing it) is left out.
func (c *ceFollower) lines() []wire.CloudEvent {
	c.t.Helper()
	b, _ := os.ReadFile(c.path)
	var out []wire.CloudEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ce wire.CloudEvent
		if json.Unmarshal(sc.Bytes(), &ce) == nil {
			out = append(out, ce)
		}
	}
	return out
}

// TestCloudEventsExportSurvivesACoreSIGKILL is issue 38's audit export
// test: a destination of format cloudevents and a `muster events --follow
// -o cloudevents` process both take every event of the log while the core
// is SIGKILLed with deliveries in flight and started again. The destination
// gets every event (none lost); an event it gets twice is the same
// CloudEvent (same id, same body: at-least-once, a receiver drops repeats by
// id). The follower, resumed with --since its last id, has every event
// exactly once.
func TestCloudEventsExportSurvivesACoreSIGKILL(t *testing.T) {
	t.Parallel()
	const secret = "e2e-cloudevents"
	var (
		mu     sync.Mutex
		bodies = map[string][][]byte{} // by CloudEvent id
		bad    []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(50 * time.Millisecond) // deliveries are in flight when the core dies
		wh, _ := standardwebhooks.NewWebhookRaw([]byte(secret))
		var ce wire.CloudEvent
		mu.Lock()
		defer mu.Unlock()
		if wh.Verify(body, r.Header) != nil || r.Header.Get("Content-Type") != wire.CloudEventContentType ||
			json.Unmarshal(body, &ce) != nil || ce.SpecVersion != "1.0" || ce.ID == "" {
			bad = append(bad, string(body))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		bodies[ce.ID] = append(bodies[ce.ID], body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "siem.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t, 1, fmt.Sprintf("notify_allow_loopback: true\nnotify:\n  - {name: siem, url: %q, format: cloudevents, secret_file: %q}\n",
		srv.URL+"/in", secretFile))
	fol := &ceFollower{t: t, f: f, path: filepath.Join(dir, "audit.jsonl")}
	fol.start("")

	for range 10 {
		f.create("node-1", "example.com/append", "{}")
	}
	// The core dies with deliveries pending and in flight.
	for range 10 {
		f.create("node-1", "example.com/append", "{}")
	}
	before, err := f.admin.Events(ctxT(t), 0, 1000, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	f.core.kill()
	mu.Lock()
	atKill := len(bodies)
	mu.Unlock()
	if atKill >= len(before.Events) {
		t.Fatalf("every event (%d) was delivered before the SIGKILL: nothing was pending", atKill)
	}
	select {
	case <-fol.done: // the follower's stream ended with the core
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not end when the core died")
	}
	f.core.restart()
	f.admin = client.NewCore("http://"+f.core.Addr(), f.secrets["admin"], &http.Client{Timeout: 10 * time.Second})
	f.alice = client.NewCore("http://"+f.core.Addr(), f.secrets["alice"], &http.Client{Timeout: 10 * time.Second})
	seen := fol.lines()
	last := ""
	if len(seen) > 0 {
		last = seen[len(seen)-1].ID
	}
	fol.start(last)
	for range 5 {
		f.create("node-1", "example.com/append", "{}")
	}

	list, err := f.admin.Events(ctxT(t), 0, 1000, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	newest := list.Events[len(list.Events)-1].Seq
	testwait.Within(t, 60*time.Second, "every event at the destination and the follower", func() bool {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		l := fol.lines()
		return n >= len(list.Events) && len(l) > 0 && l[len(l)-1].MusterSeq >= newest
	})
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d deliveries were not signed CloudEvents: %q", len(bad), bad)
	}
	dups := 0
	for _, e := range list.Events {
		id := strconv.FormatInt(e.Seq, 10)
		got := bodies[id]
		if len(got) == 0 {
			t.Errorf("event %d (%s) never reached the destination", e.Seq, e.Type)
			continue
		}
		for _, b := range got[1:] {
			dups++
			if !bytes.Equal(b, got[0]) {
				t.Errorf("event %d delivered twice with different bodies:\n%s\n%s", e.Seq, got[0], b)
			}
		}
		var ce wire.CloudEvent
		if err := json.Unmarshal(got[0], &ce); err != nil || ce.Type != "io.muster."+e.Type || ce.Data.Seq != e.Seq {
			t.Errorf("event %d: delivered %s", e.Seq, got[0])
		}
	}
	byID := map[string]int{}
	for _, ce := range fol.lines() {
		byID[ce.ID]++
	}
	for _, e := range list.Events {
		if n := byID[strconv.FormatInt(e.Seq, 10)]; n != 1 {
			t.Errorf("the follower wrote event %d %d times, want once", e.Seq, n)
		}
	}
	t.Logf("%d events, %d of the %d before the SIGKILL delivered then; %d delivered again after it (same id and body)",
		len(list.Events), atKill, len(before.Events), dups)
}
