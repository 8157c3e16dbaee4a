package ui

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// latest is the newest event's number.
func (e *env) latest(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := e.st.Read(context.Background(), func(rd store.Reader) (err error) {
		n, err = rd.LatestSeq(context.Background())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// streamUntil opens path's stream as b and reads notes until one names
// want; it fails on a note naming any of never, or when want never comes.
func streamUntil(t *testing.T, b *browser, path, want string, never ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.e.ts.URL+path, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range never {
			if strings.Contains(line, n) {
				t.Fatalf("%s sent a note it must not: %s", path, line)
			}
		}
		if strings.Contains(line, want) {
			return
		}
	}
	t.Fatalf("%s never sent the note of %s: %v", path, want, sc.Err())
}

// A page notes the newest event before it reads its data, and its stream
// (?since=) starts after it: events committed between the render and the
// stream's start come first, each only to who may read its cluster. A
// since that is no event number is a 400 saying so; one past the newest
// event counts as now; one older than every event kept starts at the
// oldest.
func TestStreamStartsAfterThePagesEvent(t *testing.T) {
	t.Parallel()
	s := setupScoped(t)
	stg, global := s.browser().signIn("stg"), s.browser().signIn("viewer")
	before := s.latest(t)
	_, _, body := stg.get("/ui/clusters")
	m := regexp.MustCompile(`data-since="(\d+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the Clusters page names no event its stream starts after:\n%s", body)
	}
	if since, _ := strconv.ParseInt(m[1], 10, 64); since < before {
		t.Fatalf("the page's since %d is older than the newest event before it (%d)", since, before)
	}
	// Committed after the render, before any stream opens.
	prod := s.action("prod", action.PendingApprove)
	stgID := s.action("staging-1", action.PendingApprove)
	streamUntil(t, stg, "/ui/stream?since="+m[1], stgID, prod, `"cluster_id":"prod"`)
	streamUntil(t, global, "/ui/stream?since="+m[1], prod)
	streamUntil(t, global, "/ui/stream?type=action.*&since="+m[1], stgID)
	// Older than every event kept: from the oldest.
	streamUntil(t, global, "/ui/stream?since=0", stgID)

	for _, q := range []string{"since=abc", "since=-1", "since=", "since=1&since=2", "since=1e3", "since=99999999999999999999"} {
		req, _ := http.NewRequest(http.MethodGet, s.ts.URL+"/ui/stream?"+q, nil)
		resp, err := global.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "since") {
			t.Errorf("stream ?%s: %d %q, want 400 naming since", q, resp.StatusCode, msg)
		}
	}
	// Past the newest event: from now on, nothing skipped after it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.ts.URL+"/ui/stream?since="+strconv.FormatInt(s.latest(t)+1000, 10), nil)
	resp, err := global.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": stream open"
	next := s.action("staging-1", action.PendingApprove)
	for sc.Scan() {
		if strings.Contains(sc.Text(), next) {
			return
		}
	}
	t.Fatalf("a stream from past the newest event missed the next one: %v", sc.Err())
}
