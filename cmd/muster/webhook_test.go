package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
)

// muster webhook listen, as a newcomer starts it with the secret muster dev
// wrote: a delivery the core signs with that secret is answered 204 and
// printed on one line, escaped; one signed with another secret is 401 and
// printed as refused; a GET is 405 and an oversized body 413.
func TestWebhookListenVerifiesAndPrintsEachDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretPath, err := writeDevWebhookSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	root.SetArgs([]string{"webhook", "listen", "--addr", "127.0.0.1:0", "--secret-file", secretPath})
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&lockedBuffer{})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook listen: %v", err)
		}
	})
	addrRE := regexp.MustCompile(`receiving on (http://[0-9.:]+/)`)
	var url string
	testwait.For(t, "the receiver listening", func() bool {
		m := addrRE.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})

	secret, err := notify.LoadSecret(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	ev := &store.Event{Seq: 7, TS: time.Now(), Type: "run.paused", Actor: "bob", ClusterID: "dev", RunID: "r-1",
		Message: "paused \x1b[31mred\x1b[0m"}
	deliver := func(key []byte, body []byte) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url+"hook", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := notify.Sign(req.Header, key, notify.MessageID(ev.Seq, "local"), time.Now(), body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, format := range []string{notify.FormatJSON, notify.FormatCloudEvents} {
		body, err := notify.Body(format, "http://127.0.0.1:7400", ev)
		if err != nil {
			t.Fatal(err)
		}
		if code := deliver(secret, body); code != http.StatusNoContent {
			t.Fatalf("%s: a delivery signed with the secret: %d", format, code)
		}
	}
	body, _ := notify.Body(notify.FormatJSON, "", ev)
	if code := deliver([]byte("another secret"), body); code != http.StatusUnauthorized {
		t.Fatalf("a delivery signed with another secret: %d, want 401", code)
	}
	if resp, err := http.Get(url); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", resp, err)
	}
	if code := deliver(secret, bytes.Repeat([]byte("x"), maxDelivery+1)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized delivery: %d, want 413", code)
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var verified, refused []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, " verified "):
			verified = append(verified, l)
		case strings.Contains(l, " REFUSED "):
			refused = append(refused, l)
		}
	}
	if len(verified) != 2 || len(refused) != 1 {
		t.Fatalf("want 2 verified lines and 1 refused:\n%s", out.String())
	}
	for _, l := range verified {
		for _, want := range []string{"run.paused", "cluster=dev", "run=r-1", "by=bob", "paused"} {
			if !strings.Contains(l, want) {
				t.Errorf("the line lacks %q: %s", want, l)
			}
		}
		if strings.ContainsRune(l, 0x1b) {
			t.Errorf("a control character from the event was printed as it is: %q", l)
		}
	}
	if !strings.Contains(verified[0], "http://127.0.0.1:7400/ui/runs/r-1") {
		t.Errorf("the json delivery's link is not printed: %s", verified[0])
	}
}

// A secret file readable by others is refused before anything listens, with
// the fix named.
func TestWebhookListenRefusesASecretOthersCanRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(path, []byte("whsec_c2VjcmV0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	root.SetArgs([]string{"webhook", "listen", "--addr", "127.0.0.1:0", "--secret-file", path})
	root.SetOut(&lockedBuffer{})
	root.SetErr(&lockedBuffer{})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("got %v, want a refusal naming chmod 600", err)
	}
}

// describeDelivery reads bodies from the network: it never panics, and what
// it prints is one line with no control character from the body.
func FuzzDescribeDelivery(f *testing.F) {
	ev := &store.Event{Seq: 1, TS: time.Unix(0, 0), Type: "node.down", ClusterID: "c", NodeID: "n\x1b[2J", Message: "line\nbreak"}
	for _, format := range []string{notify.FormatJSON, notify.FormatCloudEvents, notify.FormatSlack} {
		b, _ := notify.Body(format, "http://x", ev)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"\u202e","data":"not an object"}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := describeDelivery(body)
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				t.Fatalf("a control character %U in %q", r, s)
			}
		}
	})
}
