package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// fakeAgent is an in-memory agent API (docs/architecture.md, "The agent") on a
// real listener: a change sequence bumped by every write, paged listing with
// ack, push with 200/201/409/410/422, cancel. Tests drive the agent's side (its
// runner, its database being replaced) through its methods.
type fakeAgent struct {
	srv *httptest.Server

	mu        sync.Mutex
	nodeID    string
	clusterID string
	storeID   string
	kinds     []string
	labels    map[string]string
	seq       int64
	acked     int64
	ackCalls  int // POST /api/v1/actions/ack received
	recs      map[string]*fakeRec
	tombs     map[string]bool
	down      bool // every request fails at the transport level
	dropPush  bool // pushes are stored, then the connection is cut
	requests  []string
	infoHook  func(ctx context.Context) // called (unlocked) at the start of GET info
	pushHook  func(id string)           // called (unlocked) after a push is stored, before the answer
	// pushFields are the optional push fields info lists; a push with
	// another one is refused 400, as an agent of an earlier release does.
	pushFields []string
	// counted: the agent keeps a change counter (GET /api/v1/changes, and
	// in its info): seq and set calls, under an epoch new with the
	// store. Without it, the agent is of an earlier release (404).
	counted bool
	epoch   string
	sets    uint64
}

type fakeRec struct {
	a   action.Action
	seq int64
}

func newFakeAgent(t *testing.T, clusterID, nodeID string) *fakeAgent {
	t.Helper()
	f := &fakeAgent{
		nodeID: nodeID, clusterID: clusterID, storeID: action.NewID(),
		kinds: []string{"muster.io/debug.sleep", "muster.io/debug.ping", "muster.io/debug.fail"},
		recs:  map[string]*fakeRec{}, tombs: map[string]bool{},
	}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeAgent) cut(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string, rec *action.Action) {
	writeJSON(w, status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg, Record: rec}})
}

func (f *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if r.URL.Path == "/api/v1/actions/ack" {
		f.ackCalls++ // counted apart: tests of pushes and cancels list the POSTs
	} else {
		f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	}
	down, hook := f.down, f.infoHook
	f.mu.Unlock()
	if down {
		f.cut(w)
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/api/v1/info":
		if hook != nil {
			hook(r.Context())
		}
		f.info(w)
	case r.Method == http.MethodGet && path == "/api/v1/changes" && f.isCounted():
		f.mu.Lock()
		c := f.counter()
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
	case r.Method == http.MethodGet && path == "/api/v1/actions":
		f.list(w, r)
	case r.Method == http.MethodPost && path == "/api/v1/actions/ack":
		f.ack(w, r)
	case r.Method == http.MethodPost && path == "/api/v1/actions":
		f.push(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/cancel"):
		f.cancel(w, strings.TrimSuffix(strings.TrimPrefix(path, "/api/v1/actions/"), "/cancel"))
	default:
		writeErr(w, http.StatusNotFound, wire.CodeNotFound, "no route", nil)
	}
}

func (f *fakeAgent) info(w http.ResponseWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := map[action.State]int{}
	for _, r := range f.recs {
		q[r.a.State]++
	}
	info := wire.AgentInfo{NodeID: f.nodeID, ClusterID: f.clusterID, Version: "test",
		StoreID: f.storeID, Kinds: f.kinds, Queue: q, Labels: f.labels, PushFields: f.pushFields}
	if f.counted {
		info.Changes = f.counter()
	}
	writeJSON(w, http.StatusOK, info)
}

// isCounted reports whether the agent keeps a change counter.
func (f *fakeAgent) isCounted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counted
}

// counter is the agent's change counter; f.mu is held.
func (f *fakeAgent) counter() *wire.ChangeCounter {
	return &wire.ChangeCounter{Epoch: f.epoch + f.storeID, Counter: uint64(f.seq) + f.sets}
}

func (f *fakeAgent) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		since, _ = strconv.ParseInt(s, 10, 64)
	}
	limit := 1000
	if s := r.URL.Query().Get("limit"); s != "" {
		limit, _ = strconv.Atoi(s)
	}
	var recs []*fakeRec
	for _, rec := range f.recs {
		if rec.seq > since {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *fakeRec) int { return int(a.seq - b.seq) })
	page := wire.ChangesPage{Actions: []action.Action{}, NextCursor: since}
	for i, rec := range recs {
		if i == limit {
			page.More = true
			break
		}
		page.Actions = append(page.Actions, rec.a)
		page.NextCursor = rec.seq
	}
	writeJSON(w, http.StatusOK, page)
}

func (f *fakeAgent) ack(w http.ResponseWriter, r *http.Request) {
	var req wire.AckRequest
	if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&req) != nil {
		writeErr(w, http.StatusBadRequest, wire.CodeBadRequest, "want a JSON cursor", nil)
		return
	}
	f.mu.Lock()
	f.acked = max(f.acked, req.Cursor)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeAgent) push(w http.ResponseWriter, r *http.Request) {
	var req wire.PushRequest
	var keys map[string]json.RawMessage
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &keys)
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, wire.CodeBadRequest, err.Error(), nil)
		return
	}
	f.mu.Lock()
	for _, k := range wire.RunPlaceFields() {
		if _, ok := keys[k]; ok && !slices.Contains(f.pushFields, k) {
			f.mu.Unlock()
			writeErr(w, http.StatusBadRequest, wire.CodeBadRequest, "unknown field "+k, nil)
			return
		}
	}
	args, err := action.NormalizeArgs(req.Args)
	if err != nil {
		f.mu.Unlock()
		writeErr(w, http.StatusUnprocessableEntity, wire.CodeUnprocessable, err.Error(), nil)
		return
	}
	if f.tombs[req.ID] {
		f.mu.Unlock()
		writeErr(w, http.StatusGone, wire.CodeGone, "id was purged", nil)
		return
	}
	if !slices.Contains(f.kinds, req.Kind) {
		f.mu.Unlock()
		writeErr(w, http.StatusUnprocessableEntity, wire.CodeUnprocessable, "unknown kind "+req.Kind, nil)
		return
	}
	in := action.Action{ID: req.ID, Kind: req.Kind, Args: args}
	if old, ok := f.recs[req.ID]; ok {
		a := old.a
		f.mu.Unlock()
		if action.SameContent(&a, &in) {
			writeJSON(w, http.StatusOK, a)
		} else {
			writeErr(w, http.StatusConflict, wire.CodeConflict, "id taken", &a)
		}
		return
	}
	now := action.UTC(time.Now())
	a := action.Action{ID: req.ID, ClusterID: f.clusterID, NodeID: f.nodeID, Kind: req.Kind, Args: args,
		State: action.New, Progress: json.RawMessage(`{}`), Origin: req.Origin, Requester: req.Requester,
		ApprovedBy: req.ApprovedBy, TimeoutS: req.TimeoutS, CreatedTS: now, ScheduledTS: &now, UpdatedTS: now,
		RunID: req.RunID, Stage: req.Stage, Step: req.Step, Wave: req.Wave, Attempt: req.Attempt}
	if a.TimeoutS == 0 {
		a.TimeoutS = 3600
	}
	if req.CreatedTS != nil {
		a.CreatedTS = action.UTC(*req.CreatedTS)
	}
	f.seq++
	f.recs[a.ID] = &fakeRec{a: a, seq: f.seq}
	drop, hook := f.dropPush, f.pushHook
	f.mu.Unlock()
	if hook != nil {
		hook(a.ID)
	}
	if drop {
		f.cut(w)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (f *fakeAgent) cancel(w http.ResponseWriter, id string) {
	f.mu.Lock()
	rec, ok := f.recs[id]
	if !ok {
		f.mu.Unlock()
		writeErr(w, http.StatusNotFound, wire.CodeNotFound, "no such action", nil)
		return
	}
	if rec.a.State.Final() {
		a := rec.a
		f.mu.Unlock()
		writeErr(w, http.StatusConflict, wire.CodeConflict, "already final", &a)
		return
	}
	now := action.UTC(time.Now())
	rec.a.State, rec.a.StateReason, rec.a.FinishedTS, rec.a.UpdatedTS = action.Cancelled, action.ReasonCancelled, &now, now
	f.seq++
	rec.seq = f.seq
	a := rec.a
	f.mu.Unlock()
	writeJSON(w, http.StatusAccepted, a)
}

// --- the agent's side, driven by tests ---

// run moves an action as the agent's runner would, bumping the change sequence.
func (f *fakeAgent) run(t *testing.T, id string, to action.State, edit func(a *action.Action)) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	if !ok {
		t.Fatalf("fake agent has no action %s", id)
	}
	now := action.UTC(time.Now())
	rec.a.State, rec.a.UpdatedTS = to, now
	if to == action.Running || (to.Final() && rec.a.StartedTS == nil) {
		rec.a.StartedTS = &now
	}
	if to.Final() {
		rec.a.FinishedTS = &now
	}
	if edit != nil {
		edit(&rec.a)
	}
	f.seq++
	rec.seq = f.seq
}

// add queues an action directly on the agent (origin agent).
func (f *fakeAgent) add(kind string, state action.State) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := action.UTC(time.Now())
	a := action.Action{ID: action.NewID(), ClusterID: f.clusterID, NodeID: f.nodeID, Kind: kind,
		Args: json.RawMessage(`{}`), State: state, Progress: json.RawMessage(`{}`), Origin: action.OriginAgent,
		Requester: "local", TimeoutS: 3600, CreatedTS: now, ScheduledTS: &now, UpdatedTS: now}
	f.seq++
	f.recs[a.ID] = &fakeRec{a: a, seq: f.seq}
	return a.ID
}

// put stores a record as given (an agent that holds other content for an id).
func (f *fakeAgent) put(a action.Action) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.recs[a.ID] = &fakeRec{a: a, seq: f.seq}
}

// forget drops a record without a trace (no change, no tombstone).
func (f *fakeAgent) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, id)
}

// replaceStore gives the agent a new, empty database.
func (f *fakeAgent) replaceStore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.storeID, f.seq, f.acked = action.NewID(), 0, 0
	f.recs, f.tombs = map[string]*fakeRec{}, map[string]bool{}
}

func (f *fakeAgent) set(fn func(f *fakeAgent)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
	f.sets++
}

func (f *fakeAgent) get(id string) (action.Action, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	if !ok {
		return action.Action{}, false
	}
	return rec.a, true
}

// calls returns the requests received so far whose "METHOD uri" starts with
// prefix, and forgets every request.
func (f *fakeAgent) calls(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	f.requests = nil
	return out
}

// seen counts the requests received so far whose "METHOD uri" contains
// part, forgetting none.
func (f *fakeAgent) seen(part string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.Contains(r, part) {
			n++
		}
	}
	return n
}

// acks returns how many acknowledgements came, and forgets them.
func (f *fakeAgent) acks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.ackCalls
	f.ackCalls = 0
	return n
}

func (f *fakeAgent) String() string { return fmt.Sprintf("fake agent %s/%s", f.clusterID, f.nodeID) }
