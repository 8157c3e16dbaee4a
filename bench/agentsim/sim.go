package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/agent/api"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/wire"
)

// Version is what a simulated node's info says it runs.
const Version = "agentsim"

// Fleet is the simulated nodes of one process: each has its own listener
// and queue; one HTTP server serves them all and tells them apart by the
// local address of each connection.
type Fleet struct {
	cluster string
	// delay is how long an action other than muster.io/debug.sleep runs.
	delay time.Duration
	kinds *handlers.Registry
	srv   *http.Server

	byAddr map[string]*node // by listener address, set before serving
	nodes  []*node

	// markNanos is the start of the window that Stats measures the gaps
	// between full syncs over (see Mark).
	markNanos atomic.Int64
	requests  [routeCount]atomic.Int64
	serving   sync.WaitGroup
}

// The routes counted in Stats.
const (
	routeInfo = iota
	routeHealth
	routeChanges
	routeActions
	routePush
	routeAck
	routeShow
	routeCancel
	routeCount
)

var routeNames = [routeCount]string{"info", "health", "changes", "actions", "push", "ack", "show", "cancel"}

// node is one simulated agent.
type node struct {
	id      string
	addr    string
	storeID string
	epoch   string

	mu      sync.Mutex
	seq     int64 // the change sequence: a record's seq is its last change's
	counter uint64
	acked   int64
	acts    map[string]*entry
	byseq   []*entry // in change order
	running *entry
	waiting []*entry // NEW, in arrival order
	changed chan struct{}
	// lastInfo is when the core last asked for info (a sync's first
	// request), maxGap the longest time between two since the mark.
	lastInfo, maxGap int64
	infos            int64
}

type entry struct {
	a   action.Action
	seq int64
	// history is every transition, shown by GET /api/v1/actions/{id}.
	history []action.Transition
}

// move records a transition of e at now. Called with the node's mu held.
func (e *entry) move(now time.Time, to action.State, actor, reason string) {
	e.history = append(e.history, action.Transition{TS: now, From: e.a.State, To: to, Actor: actor, Reason: reason})
	e.a.State, e.a.UpdatedTS = to, now
}

// NewFleet builds count nodes named prefix+first … on listeners at
// consecutive addresses from ip (port 0: any free port), none served yet.
func NewFleet(cluster, prefix string, first, count int, ip net.IP, delay time.Duration) (*Fleet, error) {
	kinds, err := handlers.NewRegistry(nil, handlers.Env{})
	if err != nil {
		return nil, err
	}
	f := &Fleet{cluster: cluster, delay: delay, kinds: kinds, byAddr: make(map[string]*node, count)}
	f.markNanos.Store(time.Now().UnixNano())
	ip4 := ip.To4()
	if ip4 == nil {
		return nil, fmt.Errorf("%s is not an IPv4 address", ip)
	}
	base := uint32(ip4[0])<<24 | uint32(ip4[1])<<16 | uint32(ip4[2])<<8 | uint32(ip4[3])
	var lns []net.Listener
	for i := range count {
		v := base + uint32(i)
		a := net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		ln, err := net.Listen("tcp4", net.JoinHostPort(a.String(), "0"))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("node %d of %d: %w", i+1, count, err)
		}
		lns = append(lns, ln)
		n := &node{id: prefix + strconv.Itoa(first+i), addr: ln.Addr().String(), storeID: action.NewID(), epoch: action.NewID(),
			acts: map[string]*entry{}, changed: make(chan struct{})}
		f.nodes = append(f.nodes, n)
		f.byAddr[n.addr] = n
	}
	f.srv = &http.Server{
		Handler:           f.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, nodeKey{}, f.byAddr[c.LocalAddr().String()])
		},
	}
	for _, ln := range lns {
		f.serving.Add(1)
		go func() {
			defer f.serving.Done()
			_ = f.srv.Serve(ln)
		}()
	}
	return f, nil
}

// Close stops serving and waits.
func (f *Fleet) Close() error {
	err := f.srv.Close()
	f.serving.Wait()
	return err
}

// Nodes lists the node ids and addresses, in order.
func (f *Fleet) Nodes() (ids, addrs []string) {
	for _, n := range f.nodes {
		ids, addrs = append(ids, n.id), append(addrs, n.addr)
	}
	return ids, addrs
}

// Mark starts a new window of Stats: request counts and gaps count from now.
func (f *Fleet) Mark() {
	now := time.Now().UnixNano()
	f.markNanos.Store(now)
	for i := range f.requests {
		f.requests[i].Store(0)
	}
	for _, n := range f.nodes {
		n.mu.Lock()
		n.maxGap, n.infos = 0, 0
		n.mu.Unlock()
	}
}

// Stats is what the nodes saw since the last Mark.
type Stats struct {
	// WindowS is the time since the mark.
	WindowS float64 `json:"window_s"`
	// Requests counts the requests by route.
	Requests map[string]int64 `json:"requests"`
	// MaxSyncGapS is the longest any node went without a sync (an info
	// request) in the window, the end of the window counted as one: every
	// node was synced at least this often.
	MaxSyncGapS float64 `json:"max_sync_gap_s"`
	// Unsynced counts the nodes the window saw no sync of.
	Unsynced int `json:"unsynced"`
}

// Stats reports the window since the last Mark.
func (f *Fleet) Stats() Stats {
	now := time.Now().UnixNano()
	mark := f.markNanos.Load()
	st := Stats{WindowS: float64(now-mark) / 1e9, Requests: map[string]int64{}}
	for i, name := range routeNames {
		st.Requests[name] = f.requests[i].Load()
	}
	var gap int64
	for _, n := range f.nodes {
		n.mu.Lock()
		g, last, infos := n.maxGap, n.lastInfo, n.infos
		n.mu.Unlock()
		if infos == 0 {
			st.Unsynced++
		}
		gap = max(gap, g, now-max(last, mark))
	}
	st.MaxSyncGapS = float64(gap) / 1e9
	return st
}

type nodeKey struct{}

func (f *Fleet) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, route int, h func(*node, http.ResponseWriter, *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			f.requests[route].Add(1)
			n, _ := r.Context().Value(nodeKey{}).(*node)
			if n == nil {
				writeError(w, http.StatusInternalServerError, wire.CodeInternal, "no node at this address")
				return
			}
			if r.Method == http.MethodPost && !jsonRequest(r) {
				writeError(w, http.StatusUnsupportedMediaType, wire.CodeUnsupportedMediaType, "a write must be sent as application/json")
				return
			}
			h(n, w, r)
		})
	}
	handle("GET /api/v1/health", routeHealth, func(_ *node, w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, wire.Health{Status: "ok"})
	})
	handle("GET /api/v1/info", routeInfo, f.info)
	handle("GET /api/v1/changes", routeChanges, func(n *node, w http.ResponseWriter, _ *http.Request) {
		n.mu.Lock()
		c := wire.ChangeCounter{Epoch: n.epoch, Counter: n.counter}
		n.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
	})
	handle("GET /api/v1/actions", routeActions, f.changes)
	handle("POST /api/v1/actions", routePush, f.push)
	handle("POST /api/v1/actions/ack", routeAck, f.ack)
	handle("GET /api/v1/actions/{id}", routeShow, func(n *node, w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		e := n.acts[r.PathValue("id")]
		var a action.Action
		if e != nil {
			a = e.a
			a.History = slices.Clone(e.history)
		}
		n.mu.Unlock()
		if e == nil {
			writeError(w, http.StatusNotFound, wire.CodeNotFound, "not found: "+r.PathValue("id"))
			return
		}
		writeJSON(w, http.StatusOK, a)
	})
	handle("POST /api/v1/actions/{id}/cancel", routeCancel, f.cancel)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no such route")
	})
	return mux
}

// jsonRequest reports whether a write declares a JSON body, as the
// agent's requireJSON asks over TCP.
func jsonRequest(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

func (f *Fleet) info(n *node, w http.ResponseWriter, _ *http.Request) {
	now := time.Now().UnixNano()
	counts := map[action.State]int{}
	for _, s := range []action.State{action.New, action.Running, action.Done, action.Failed, action.Cancelled} {
		counts[s] = 0
	}
	n.mu.Lock()
	// The counter is read before the rest, as the agent reads it.
	changes := &wire.ChangeCounter{Epoch: n.epoch, Counter: n.counter}
	if n.lastInfo != 0 {
		n.maxGap = max(n.maxGap, now-max(n.lastInfo, f.markNanos.Load()))
	}
	n.lastInfo = now
	n.infos++
	for _, e := range n.acts {
		counts[e.a.State]++
	}
	n.mu.Unlock()
	writeJSON(w, http.StatusOK, wire.AgentInfo{
		NodeID: n.id, ClusterID: f.cluster, Version: Version, StoreID: n.storeID,
		Kinds: f.kinds.Kinds(), Queue: counts, Labels: map[string]string{},
		PushFields: append(wire.RunPlaceFields(), wire.TraceFields()...), Changes: changes,
	})
}

// changes is GET /api/v1/actions: the records changed after since, in
// change order, a page at a time; with wait, held until one changes.
func (f *Fleet) changes(n *node, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, limit, wait := int64(0), api.DefaultLimit, time.Duration(0)
	if s := q.Get("since"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, "since must be a non-negative integer cursor")
			return
		}
		since = v
	}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > api.MaxLimit {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("limit must be between 1 and %d", api.MaxLimit))
			return
		}
		limit = v
	}
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, "wait must be a non-negative duration such as 20s")
			return
		}
		wait = min(d, api.MaxWait)
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		n.mu.Lock()
		page := wire.ChangesPage{Actions: []action.Action{}, NextCursor: since, WaitMS: wait.Milliseconds()}
		i, _ := slices.BinarySearchFunc(n.byseq, since+1, func(e *entry, s int64) int { return cmpInt(e.seq, s) })
		for ; i < len(n.byseq); i++ {
			if len(page.Actions) == limit {
				page.More = true
				break
			}
			page.Actions = append(page.Actions, n.byseq[i].a)
			page.NextCursor = n.byseq[i].seq
		}
		changed := n.changed
		n.mu.Unlock()
		if len(page.Actions) > 0 || timeout == nil {
			writeJSON(w, http.StatusOK, page)
			return
		}
		select {
		case <-changed:
			continue
		case <-timeout:
		case <-r.Context().Done():
		}
		writeJSON(w, http.StatusOK, page)
		return
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *Fleet) ack(n *node, w http.ResponseWriter, r *http.Request) {
	body, err := jsonbody.Read(r.Body, api.MaxBody)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	var req wire.AckRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	if req.Cursor < 0 {
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, "cursor must be a non-negative integer")
		return
	}
	n.mu.Lock()
	n.acked = max(n.acked, min(req.Cursor, n.seq))
	n.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fleet) push(n *node, w http.ResponseWriter, r *http.Request) {
	body, err := jsonbody.Read(r.Body, api.MaxBody)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	a, err := api.DecodePush(body, n.id, f.cluster)
	if err != nil {
		var st interface {
			StatusCode() int
			ErrorCode() string
		}
		if errors.As(err, &st) {
			writeError(w, st.StatusCode(), st.ErrorCode(), err.Error())
			return
		}
		writeBodyError(w, err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.acts[a.ID]; ok {
		if !action.SameContent(&e.a, a) {
			writeJSON(w, http.StatusConflict, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeConflict,
				Message: "this id is already queued with another kind or args", Record: &e.a}})
			return
		}
		writeJSON(w, http.StatusOK, e.a)
		return
	}
	h, ok := f.kinds.Get(a.Kind)
	if !ok {
		writeError(w, http.StatusUnprocessableEntity, wire.CodeUnprocessable, fmt.Sprintf("unknown kind %q on this agent", a.Kind))
		return
	}
	if err := h.Validate(a.Args); err != nil {
		writeError(w, http.StatusUnprocessableEntity, wire.CodeUnprocessable, err.Error())
		return
	}
	if a.TimeoutS == 0 {
		a.TimeoutS = int(time.Hour / time.Second) // the agent's actions.default_timeout
	}
	now := action.UTC(time.Now())
	rec := *a
	rec.State, rec.StateReason, rec.Progress, rec.Output = "", "", json.RawMessage("{}"), ""
	if rec.CreatedTS.IsZero() {
		rec.CreatedTS = now
	}
	rec.ScheduledTS = &now
	e := &entry{a: rec}
	actor := a.Requester
	if actor == "" {
		actor = "api"
	}
	e.move(now, action.New, actor, "queued")
	n.acts[a.ID] = e
	n.waiting = append(n.waiting, e)
	n.touch(e)
	answer := e.a
	f.runNext(n)
	writeJSON(w, http.StatusCreated, answer)
}

// touch gives e the next change sequence and tells the waiting pulls.
// Called with n.mu held.
func (n *node) touch(e *entry) {
	if e.seq != 0 {
		i, found := slices.BinarySearchFunc(n.byseq, e.seq, func(x *entry, s int64) int { return cmpInt(x.seq, s) })
		if found {
			n.byseq = slices.Delete(n.byseq, i, i+1)
		}
	}
	n.seq++
	e.seq = n.seq
	n.byseq = append(n.byseq, e)
	n.counter++
	close(n.changed)
	n.changed = make(chan struct{})
}

// runNext starts the first NEW action when none runs, as the agent's
// sequential runner does; it finishes after the fleet's delay (or its
// seconds, for muster.io/debug.sleep). Called with n.mu held.
func (f *Fleet) runNext(n *node) {
	if n.running != nil || len(n.waiting) == 0 {
		return
	}
	e := n.waiting[0]
	n.waiting = n.waiting[1:]
	now := action.UTC(time.Now())
	e.move(now, action.Running, "runner", "started")
	e.a.StartedTS = &now
	n.running = e
	d := f.delay
	if e.a.Kind == handlers.KindSleep {
		var args struct {
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal(e.a.Args, &args) == nil {
			d = time.Duration(args.Seconds * float64(time.Second))
		}
		// The deadline goes into progress, as the agent's sleep does.
		e.a.Progress, _ = json.Marshal(struct {
			Deadline time.Time `json:"deadline"`
		}{action.UTC(now.Add(d))})
	}
	n.touch(e)
	time.AfterFunc(d, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		f.finish(n, e, action.Done, "")
	})
}

// finish ends e (when it is still running) and starts the next. Called
// with n.mu held.
func (f *Fleet) finish(n *node, e *entry, st action.State, reason string) {
	if n.running != e {
		return
	}
	now := action.UTC(time.Now())
	switch {
	case st == action.Done && e.a.Kind == handlers.KindPing:
		e.a.Output = "pong"
	case e.a.Kind == handlers.KindFail && st == action.Done:
		st, reason = action.Failed, "failed on purpose"
	}
	e.move(now, st, "runner", reason)
	e.a.StateReason, e.a.FinishedTS = reason, &now
	n.running = nil
	n.touch(e)
	f.runNext(n)
}

func (f *Fleet) cancel(n *node, w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.acts[id]
	switch {
	case e == nil:
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "not found: "+id)
	case e.a.State.Final():
		writeJSON(w, http.StatusConflict, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeConflict,
			Message: fmt.Sprintf("already final: %s is %s", id, e.a.State), State: string(e.a.State)}})
	case e.a.State == action.Running:
		// The agent answers with the record as it is, and its runner
		// stops the action.
		writeJSON(w, http.StatusAccepted, e.a)
		f.finish(n, e, action.Cancelled, action.ReasonCancelled)
	default:
		n.waiting = slices.DeleteFunc(n.waiting, func(x *entry) bool { return x == e })
		now := action.UTC(time.Now())
		e.move(now, action.Cancelled, "api", action.ReasonCancelled)
		e.a.StateReason, e.a.FinishedTS = action.ReasonCancelled, &now
		n.touch(e)
		writeJSON(w, http.StatusAccepted, e.a)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg}})
}

// writeBodyError answers a body that could not be read or decoded.
func writeBodyError(w http.ResponseWriter, err error) {
	if errors.Is(err, jsonbody.ErrTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, wire.CodeBadRequest, err.Error())
}
