package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/wire"
)

// streamBatch is how many events a stream reads from the store at a time.
const streamBatch = 500

func toWireEvent(e store.Event) wire.Event {
	return wire.Event{
		Seq: e.Seq, TS: e.TS, Type: e.Type, Actor: e.Actor, ClientAddr: e.ClientAddr,
		ClusterID: e.ClusterID, NodeID: e.NodeID, ActionID: e.ActionID, RunID: e.RunID, Message: e.Message,
		Data: e.Data,
	}
}

// eventFilter keeps the events a caller asked for (?action_id=, ?run_id=,
// ?cluster=, ?node=, ?type= a comma list of types and families like node.*).
type eventFilter struct {
	actionID, runID, clusterID, nodeID string
	types                              []string
	// visible are the clusters the caller may read (ops.Visible.Event).
	visible ops.Visible
}

func newEventFilter(c *echo.Context) (eventFilter, error) {
	types, err := store.ParseEventTypes(c.QueryParam("type"))
	if err != nil {
		return eventFilter{}, badRequest("type: %v", err)
	}
	return eventFilter{actionID: c.QueryParam("action_id"), runID: c.QueryParam("run_id"),
		clusterID: c.QueryParam("cluster"), nodeID: c.QueryParam("node"), types: types}, nil
}

func (f eventFilter) keep(e *store.Event) bool {
	return (f.actionID == "" || e.ActionID == f.actionID) && (f.runID == "" || e.RunID == f.runID) &&
		(f.clusterID == "" || e.ClusterID == f.clusterID) && (f.nodeID == "" || e.NodeID == f.nodeID) &&
		store.MatchEventType(f.types, e.Type) && f.visible.Event(e)
}

func parseSeq(name, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("%s must be a non-negative event sequence number, not %q", name, v)
	}
	return n, nil
}

// listEvents answers GET /api/v1/events?since=&limit=: events with a sequence
// number above since, oldest first; or, with ?tail=N instead of since, the
// newest N events, oldest first.
func (s *Server) listEvents(c *echo.Context) error {
	var since int64
	var err error
	if v := c.QueryParam("since"); v != "" {
		if since, err = parseSeq("since", v); err != nil {
			return err
		}
	}
	limit, err := limitParam(c.QueryParam("limit"), DefaultEventLimit, MaxEventLimit)
	if err != nil {
		return err
	}
	var tail int64
	if v := c.QueryParam("tail"); v != "" {
		if c.QueryParam("since") != "" {
			return badRequest("since and tail exclude each other")
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxEventLimit {
			return badRequest("tail must be an integer from 1 to %d, not %q", MaxEventLimit, v)
		}
		tail = int64(n)
		limit = int(tail)
	}
	f, err := newEventFilter(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var evs []store.Event
	if err := s.st.Read(ctx, func(r store.Reader) error {
		var err error
		if tail > 0 {
			// The last tail events: sequence numbers have no gaps but for
			// rolled-back appends, so this is at most tail of them.
			last, err := r.LatestSeq(ctx)
			if err != nil {
				return err
			}
			since = max(0, last-tail)
		}
		if f.visible, err = s.visible(c, r); err != nil {
			return err
		}
		evs, err = r.Events(ctx, since, limit)
		return err
	}); err != nil {
		return err
	}
	out := wire.EventList{Events: []wire.Event{}, Next: since}
	for i := range evs {
		out.Next = evs[i].Seq
		if f.keep(&evs[i]) {
			out.Events = append(out.Events, toWireEvent(evs[i]))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// acquireStream counts one more stream for a token, or refuses it: the
// token's streams (the web UI's included) or the core's are at their cap.
func (s *Server) acquireStream(name string) (release func(), err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, echo.ErrServiceUnavailable
	}
	rel, err := s.cfg.Streams.Acquire(name)
	switch {
	case errors.Is(err, streams.ErrTokenFull):
		return nil, fmt.Errorf("%w: %w", ErrTooMany, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	s.metrics.streams.Inc()
	return func() {
		rel()
		s.metrics.streams.Dec()
	}, nil
}

// streamEvents answers GET /api/v1/events/stream with Server-Sent Events.
// Each event is one SSE message whose id is its sequence number and whose
// data is the event as JSON. It starts after Last-Event-ID (the header a
// reconnecting EventSource sends), else after ?since=, else with the events
// appended after the connection was made. Headers are sent only once that
// starting point is fixed, so a client that has them misses nothing that
// follows. The stream ends when the client leaves or the API closes.
func (s *Server) streamEvents(c *echo.Context) error {
	ctx := c.Request().Context()
	start := c.Request().Header.Get("Last-Event-ID")
	name := "Last-Event-ID"
	if start == "" {
		start, name = c.QueryParam("since"), "since"
	}
	var since int64 = -1
	if start != "" {
		n, err := parseSeq(name, start)
		if err != nil {
			return err
		}
		since = n
	}
	f, err := newEventFilter(c)
	if err != nil {
		return err
	}
	release, err := s.acquireStream(who(c).Name)
	if err != nil {
		return err
	}
	defer release()

	// Subscribe before reading the starting point: a commit in between
	// is then signalled, and read from the store.
	notify, unsubscribe := s.st.Subscribe()
	defer unsubscribe()
	if since < 0 {
		if err := s.st.Read(ctx, func(r store.Reader) error {
			var err error
			since, err = r.LatestSeq(ctx)
			return err
		}); err != nil {
			return err
		}
	}

	w := c.Response()
	rc := http.NewResponseController(w)
	// The server's timeouts are for requests, not for a stream: no read
	// deadline (the client sends nothing more; its leaving is seen by the
	// writes), and a deadline per write instead of one for the whole
	// answer, so that a client that stops reading is dropped.
	// (A writer without deadlines, such as a test recorder, has none to move.)
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	deadline := func() error {
		err := rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		if errors.Is(err, http.ErrNotSupported) {
			return nil
		}
		return err
	}
	if err := deadline(); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": stream open\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}

	keepAlive := time.NewTicker(s.cfg.StreamKeepAlive)
	defer keepAlive.Stop()
	for {
		if err := deadline(); err != nil {
			return nil
		}
		// The clusters the caller may read, again at each wake: a cluster
		// made since, or a label changed, counts from then on.
		var err error
		if f.visible, err = s.ops.Visibility(ctx, who(c)); err != nil {
			return nil
		}
		since, err = s.sendEvents(ctx, w, f, since)
		if err != nil {
			// The client left, or the store failed mid-stream: the status is
			// sent already, so all that is left is to end the stream.
			if ctx.Err() == nil {
				s.log.Debug("event stream ended", "err", err)
			}
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-notify:
		case <-keepAlive.C:
			if err := deadline(); err != nil {
				return nil
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
		}
	}
}

// sendEvents writes every event after since that f keeps, and returns the
// last seq read.
func (s *Server) sendEvents(ctx context.Context, w http.ResponseWriter, f eventFilter, since int64) (int64, error) {
	return store.EachEvent(ctx, s.st, since, streamBatch, func(e *store.Event) error {
		if !f.keep(e) {
			return nil
		}
		b, err := json.Marshal(toWireEvent(*e))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, b)
		return err
	})
}

// openStreams returns how many event streams a token has open.
func (s *Server) openStreams(name string) int {
	_, n := s.cfg.Streams.Open(name)
	return n
}
