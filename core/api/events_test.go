package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

func TestListEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, nil)

	var l wire.EventList
	e.call(http.MethodGet, "/api/v1/events", "viewer", nil, http.StatusOK, &l)
	all := l.Events
	if len(all) < 7 { // 5 token.created from setup, then created and approved
		t.Fatalf("%d events", len(all))
	}
	last := all[len(all)-1]
	if last.Type != store.EventActionApproved || last.Actor != "appr" || last.ActionID != a.ID || l.Next != last.Seq {
		t.Fatalf("last event %+v next %d", last, l.Next)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatal("events not in sequence order")
		}
	}
	// since and limit page through the log.
	e.call(http.MethodGet, "/api/v1/events?limit=2&since="+strconv.FormatInt(all[1].Seq, 10), "viewer", nil, http.StatusOK, &l)
	if len(l.Events) != 2 || l.Events[0].Seq != all[2].Seq || l.Next != all[3].Seq {
		t.Fatalf("page %+v", l)
	}
	e.call(http.MethodGet, "/api/v1/events?action_id="+a.ID, "viewer", nil, http.StatusOK, &l)
	if len(l.Events) != 3 || l.Events[1].Type != store.EventApprovalWaiting {
		t.Fatalf("action_id filter: %d events, want 3 (created, approval.waiting, approved)", len(l.Events))
	}
	e.call(http.MethodGet, "/api/v1/events?tail=3", "viewer", nil, http.StatusOK, &l)
	if len(l.Events) != 3 || l.Events[2].Seq != last.Seq || l.Events[0].Seq != all[len(all)-3].Seq {
		t.Fatalf("tail=3: %+v", l.Events)
	}
	e.fail(http.MethodGet, "/api/v1/events?tail=3&since=1", "viewer", nil, http.StatusBadRequest)
	e.fail(http.MethodGet, "/api/v1/events?since=-1", "viewer", nil, http.StatusBadRequest)
	e.fail(http.MethodGet, "/api/v1/events?limit=zero", "viewer", nil, http.StatusBadRequest)
}

func TestStreamDeliversNewEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.client("viewer").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Appended after connecting: the stream delivers it, and nothing older.
	a := e.create("op", wire.CreateActionRequest{})
	ev, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != store.EventActionCreated || ev.ActionID != a.ID || ev.Actor != "op" {
		t.Fatalf("first streamed event %+v, want the creation of %s", ev, a.ID)
	}
	if s.LastID() != ev.Seq {
		t.Fatalf("SSE id %d differs from the event seq %d", s.LastID(), ev.Seq)
	}
	ev, err = s.Next()
	if err != nil || ev.Type != store.EventApprovalWaiting || ev.ActionID != a.ID {
		t.Fatalf("second streamed event %+v, %v, want approval.waiting", ev, err)
	}
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/reject", "appr", nil, http.StatusOK, nil)
	ev, err = s.Next()
	if err != nil || ev.Type != store.EventActionRejected {
		t.Fatalf("second streamed event %+v, %v", ev, err)
	}
}

func TestStreamHonoursLastEventID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, nil)
	all := e.events()
	from := all[len(all)-3] // resume after this one: two events follow

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.secrets["viewer"])
	req.Header.Set("Last-Event-ID", strconv.FormatInt(from.Seq, 10))
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// Read the raw SSE text of the two events after from.
	var text strings.Builder
	buf := make([]byte, 4096)
	lastID := "id: " + strconv.FormatInt(all[len(all)-1].Seq, 10) + "\n"
	for !strings.Contains(text.String(), lastID) || !strings.HasSuffix(text.String(), "\n\n") {
		n, err := resp.Body.Read(buf)
		text.Write(buf[:n])
		if err != nil {
			t.Fatalf("read: %v (so far %q)", err, text.String())
		}
	}
	got := text.String()
	for _, ev := range all[len(all)-2:] {
		if !strings.Contains(got, "id: "+strconv.FormatInt(ev.Seq, 10)+"\ndata: {") {
			t.Fatalf("stream %q lacks event %d", got, ev.Seq)
		}
	}
	if strings.Contains(got, "id: "+strconv.FormatInt(from.Seq, 10)+"\n") {
		t.Fatalf("stream repeats the Last-Event-ID event: %q", got)
	}
	// The typed client resumes the same way.
	s, err := e.client("viewer").Stream(ctx, from.Seq, client.EventFilter{ActionID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Next()
	if err != nil || ev.Seq != all[len(all)-2].Seq {
		t.Fatalf("resumed at %+v, %v; want seq %d", ev, err, all[len(all)-2].Seq)
	}
}

func TestAPI4StreamCapPerToken(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxSSEPerToken = 2 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := e.client("viewer")
	s1, err := c.Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(ctx, -1, client.EventFilter{})
	if client.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("third stream: %v, want 429", err)
	}
	// Another token has its own allowance.
	s3, err := e.client("op").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatalf("another token's stream: %v", err)
	}
	s3.Close()
	// Closing one frees a place once the server has seen it go.
	s1.Close()
	testwait.For(t, "a freed stream slot", func() bool {
		s, err := c.Stream(ctx, -1, client.EventFilter{})
		if err != nil {
			return false
		}
		s.Close()
		return true
	})
	s2.Close()
}

func TestStreamEndsOnClose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.client("viewer").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	e.srv.Close()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrStreamClosed) {
			t.Fatalf("Next after Close: %v, want ErrStreamClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("the stream did not end when the API closed")
	}
	// A closed API refuses new streams.
	if _, err := e.client("viewer").Stream(ctx, -1, client.EventFilter{}); client.StatusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("stream after Close: %v, want 503", err)
	}
}

func TestStreamEndsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.client("viewer").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testwait.For(t, "the stream to be counted", func() bool { return e.srv.openStreams("viewer") == 1 })
	cancel()
	testwait.For(t, "the handler to return", func() bool { return e.srv.openStreams("viewer") == 0 })
}

func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.StreamKeepAlive = 10 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.secrets["viewer"])
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	buf := make([]byte, 512)
	for !strings.Contains(text.String(), ": keep-alive\n\n") {
		n, err := resp.Body.Read(buf)
		text.Write(buf[:n])
		if err != nil {
			t.Fatalf("read: %v (so far %q)", err, text.String())
		}
	}
}

// ?type= and ?node= narrow the log; an unknown type is a 400.
func TestEventsByTypeAndNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	var l wire.EventList
	e.call(http.MethodGet, "/api/v1/events?type=action.created&node="+a.NodeID, "op", nil, http.StatusOK, &l)
	if len(l.Events) != 1 || l.Events[0].ActionID != a.ID {
		t.Fatalf("type=action.created: %+v", l.Events)
	}
	e.call(http.MethodGet, "/api/v1/events?type=token.*", "op", nil, http.StatusOK, &l)
	for _, ev := range l.Events {
		if ev.Type != "token.created" {
			t.Fatalf("type=token.*: %+v", ev)
		}
	}
	e.call(http.MethodGet, "/api/v1/events?node=nope", "op", nil, http.StatusOK, &l)
	if len(l.Events) != 0 {
		t.Fatalf("node=nope: %+v", l.Events)
	}
	for _, p := range []string{"/api/v1/events?type=action.creatd", "/api/v1/events/stream?type=*"} {
		if d := e.fail(http.MethodGet, p, "op", nil, http.StatusBadRequest); !strings.Contains(d.Message, "unknown event type") {
			t.Fatalf("%s: %+v", p, d)
		}
	}
}
