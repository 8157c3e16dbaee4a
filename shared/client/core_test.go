package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// sseServer answers the event stream with body, after checking the headers
// the client must send.
func sseServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/events/stream" || r.Header.Get("Authorization") != "Bearer mst_x" {
			http.Error(w, `{"error":{"code":"unauthorized","message":"no"}}`, http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Last-Event-ID") != "41" || r.URL.Query().Get("action_id") != "a1" {
			http.Error(w, `{"error":{"code":"bad_request","message":"headers"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestEventStreamParsing(t *testing.T) {
	t.Parallel()
	body := ": stream open\n\n" +
		"id: 42\ndata: {\"seq\":42,\"type\":\"action.created\",\"message\":\"x\"}\n\n" +
		": keep-alive\n\n" +
		"id: 43\r\ndata: {\"seq\":43,\r\ndata: \"type\":\"action.approved\"}\r\n\r\n" +
		"id: 44\ndata: {\"seq\":44"
	c := NewCore(sseServer(t, body).URL, "mst_x", nil)
	s, err := c.Stream(context.Background(), 41, EventFilter{ActionID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Next()
	if err != nil || ev.Seq != 42 || ev.Type != "action.created" || s.LastID() != 42 {
		t.Fatalf("first event %+v, %v, last id %d", ev, err, s.LastID())
	}
	ev, err = s.Next()
	if err != nil || ev.Seq != 43 || ev.Type != "action.approved" || s.LastID() != 43 {
		t.Fatalf("multi-line CRLF event %+v, %v", ev, err)
	}
	// The server ends the stream in the middle of an event.
	if _, err := s.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("truncated stream: %v, want ErrStreamClosed", err)
	}
	if s.LastID() != 43 {
		t.Fatalf("last id %d after a cut event, want 43", s.LastID())
	}
}

func TestEventStreamRefused(t *testing.T) {
	t.Parallel()
	c := NewCore(sseServer(t, "").URL, "mst_wrong", nil)
	_, err := c.Stream(context.Background(), 41, EventFilter{ActionID: "a1"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Detail.Code != "unauthorized" {
		t.Fatalf("Stream with a bad token: %v, want a 401 APIError", err)
	}
}
