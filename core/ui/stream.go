package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/textsafe"
)

const (
	// streamBatch is how many events the stream reads at a time.
	streamBatch = 500
	// streamWriteGrace is how long a write to the stream may take beyond
	// the keep-alive period.
	streamWriteGrace = 30 * time.Second
	// streamGap is the least time between two rounds of notes on a stream:
	// a page refreshes its live region at most once per round, so a busy
	// event log costs each open tab at most one refresh a second.
	streamGap = time.Second
)

// streamNote is what the live-update stream sends for each event: enough for
// a page to know whether it is concerned, nothing to render.
type streamNote struct {
	Seq      int64  `json:"seq"`
	Type     string `json:"type"`
	Cluster  string `json:"cluster_id,omitempty"`
	Node     string `json:"node_id,omitempty"`
	ActionID string `json:"action_id,omitempty"`
	RunID    string `json:"run_id,omitempty"`
}

// acquireStream counts one more stream of a session and its token, or
// says why not (an HTTP status and a message).
func (s *Server) acquireStream(v *visitor) (release func(), status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hash := v.sess.Hash
	switch {
	case s.closed:
		return nil, http.StatusServiceUnavailable, "the web UI is stopping"
	case s.streams[hash] >= MaxStreamsPerSession:
		return nil, http.StatusTooManyRequests, "too many live-update streams are open in this session"
	}
	rel, err := s.cfg.Streams.Acquire(v.tok.Name)
	switch {
	case errors.Is(err, streams.ErrTokenFull):
		return nil, http.StatusTooManyRequests, "too many live-update streams are open for this token"
	case err != nil:
		return nil, http.StatusServiceUnavailable, "too many live-update streams are open; retry later"
	}
	s.streams[hash]++
	return func() {
		rel()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.streams[hash]--; s.streams[hash] <= 0 {
			delete(s.streams, hash)
		}
	}, 0, ""
}

// stream answers GET /ui/stream with Server-Sent Events: one message per
// event of the log matching the filter (?type=, ?cluster=, ?node=,
// ?action=, ?run=), starting after Last-Event-ID when a reconnecting EventSource
// sends it, else after ?since= (the last event the page was rendered from,
// so that what was committed between the render and the stream's start
// makes the first refresh), else with what is appended from now on. It ends
// when the browser leaves, the session expires, or the UI closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	f, err := decodeEventFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	since, err := streamStart(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	release, status, msg := s.acquireStream(v)
	if release == nil {
		http.Error(w, msg, status)
		return
	}
	defer release()
	notify, unsubscribe := s.st.Subscribe()
	defer unsubscribe()
	// From now on when the page named no event; a number past the newest
	// event (a restored store) counts as now, so that nothing after it is
	// skipped. A number older than the oldest event kept starts at the
	// oldest kept.
	if err := s.st.Read(ctx, func(rd store.Reader) error {
		latest, err := rd.LatestSeq(ctx)
		if since < 0 || since > latest {
			since = latest
		}
		return err
	}); err != nil {
		s.log.Error("stream start", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := fmt.Fprint(w, ": stream open\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	keepAlive := time.NewTicker(s.cfg.StreamKeepAlive)
	defer keepAlive.Stop()
	// The session's end is checked on every wake-up: an expired one ends
	// the stream, and the page's script sends the person to sign in.
	expiry := time.NewTimer(time.Until(v.sess.ExpiresTS))
	defer expiry.Stop()
	for {
		// Each round of writes has its own deadline, whatever the server's
		// WriteTimeout: a browser that stops reading is let go.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamKeepAlive + streamWriteGrace))
		// The clusters the visitor may read, again at each round, with
		// their grants as they are now: a cluster made since, a grant
		// given or taken, counts from then on.
		vis, err := s.streamVisibility(ctx, v)
		if err != nil {
			s.log.Error("stream visibility", "err", err)
			return
		}
		var sent int
		since, sent, err = s.sendNotes(ctx, w, f, vis, since)
		if err != nil || rc.Flush() != nil {
			return
		}
		if sent > 0 {
			// What happens meanwhile goes out together in the next round.
			gap := time.NewTimer(streamGap)
			select {
			case <-ctx.Done():
			case <-s.done:
			case <-gap.C:
			}
			gap.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-expiry.C:
			_, _ = fmt.Fprint(w, "event: signed-out\ndata: {}\n\n")
			_ = rc.Flush()
			return
		case <-notify:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		// A session ended elsewhere (signed out in another tab, or its
		// token revoked) ends its streams too.
		if !s.sessions.Live(ctx, v.sess.Hash) {
			_, _ = fmt.Fprint(w, "event: signed-out\ndata: {}\n\n")
			_ = rc.Flush()
			return
		}
	}
}

// streamStart is the event number a stream starts after: Last-Event-ID
// when a reconnecting EventSource sends it, else the page's ?since=, else
// -1 (from now on). A value that is no event number is an error meant for
// the visitor.
func streamStart(r *http.Request) (int64, error) {
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return 0, errors.New("Last-Event-ID is not an event sequence number")
		}
		return n, nil
	}
	raw, ok := r.URL.Query()["since"]
	if !ok {
		return -1, nil
	}
	if len(raw) != 1 {
		return 0, errors.New("since: give it once, the number of the last event the page was rendered from")
	}
	n, err := strconv.ParseInt(raw[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("since %q: want the number of the last event the page was rendered from (0 or more)", textsafe.Escape(clip(raw[0], 40)))
	}
	return n, nil
}

// streamVisibility is the set of clusters v may read now: the caller
// resolved again (ops.Identify) and its visibility.
func (s *Server) streamVisibility(ctx context.Context, v *visitor) (ops.Visible, error) {
	who, err := s.ops.Identify(ctx, v.who.Name, v.who.Roles, v.who.Groups, v.who.Addr)
	if err != nil {
		return ops.Visible{}, err
	}
	return s.ops.Visibility(ctx, who)
}

// sendNotes writes a note for every event after since that matches f and
// vis keeps, and returns the last seq read and how many notes it wrote.
func (s *Server) sendNotes(ctx context.Context, w http.ResponseWriter, f eventFilter, vis ops.Visible, since int64) (int64, int, error) {
	sent := 0
	last, err := store.EachEvent(ctx, s.st, since, streamBatch, func(e *store.Event) error {
		if !f.keep(e) || !vis.Event(e) {
			return nil
		}
		sent++
		b, err := json.Marshal(streamNote{Seq: e.Seq, Type: e.Type, Cluster: e.ClusterID, Node: e.NodeID,
			ActionID: e.ActionID, RunID: e.RunID})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, b)
		return err
	})
	return last, sent, err
}
