package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/mock/gomock"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/shared/wire"
)

// counterOf reads GET /api/v1/changes.
func counterOf(t *testing.T, f *fixture) wire.ChangeCounter {
	t.Helper()
	st, b := f.do(t, "GET", "/api/v1/changes", "")
	var c wire.ChangeCounter
	if st != http.StatusOK || json.Unmarshal(b, &c) != nil || c.Check() != nil {
		t.Fatalf("GET /api/v1/changes: %d %s", st, b)
	}
	return c
}

// TestChangeCounterMovesOnEveryChangeAndOnlyThen: the counter stays put
// while nothing changes (reads, an unknown id, a refused push), moves with
// a push, a cancel and IdentityChanged, and info carries the same pair.
func TestChangeCounterMovesOnEveryChangeAndOnlyThen(t *testing.T) {
	t.Parallel()
	f, srv, _ := setupWait(t, 0)
	c0 := counterOf(t, f)
	f.do(t, "GET", "/api/v1/info", "")
	f.do(t, "GET", "/api/v1/actions?since=0", "")
	f.do(t, "GET", "/api/v1/actions/01J0000000000000000000000X", "")
	f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/unknown"}`) // refused: 422
	if c := counterOf(t, f); c != c0 {
		t.Fatalf("counter %+v after reads and a refused push, want %+v", c, c0)
	}
	st, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`)
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("push: %d %s", st, b)
	}
	c1 := counterOf(t, f)
	if c1.Epoch != c0.Epoch || c1.Counter <= c0.Counter {
		t.Fatalf("counter %+v after a push, want it past %+v in the same epoch", c1, c0)
	}
	var info wire.AgentInfo
	if _, b := f.do(t, "GET", "/api/v1/info", ""); json.Unmarshal(b, &info) != nil || info.Changes == nil || *info.Changes != c1 {
		t.Fatalf("info tells the counter %+v, want %+v", info.Changes, c1)
	}
	srv.IdentityChanged()
	c2 := counterOf(t, f)
	if c2.Counter <= c1.Counter {
		t.Fatalf("counter %+v after IdentityChanged, want it past %+v", c2, c1)
	}
}

// TestChangeCounterMovesWithARenewal: a renewed certificate moves the
// counter.
func TestChangeCounterMovesWithARenewal(t *testing.T) {
	t.Parallel()
	f, _, _ := setupWait(t, 0)
	var renewals atomic.Int64
	reg, _ := handlers.NewRegistry(nil, handlers.Env{})
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Queue: f.q, Runner: NewMockRunner(gomock.NewController(t)), Kinds: reg,
		Renewals: renewals.Load})
	g, ts := newFixture(t, srv.Handler(), f.q)
	t.Cleanup(ts.Close)
	before := counterOf(t, g)
	renewals.Add(1)
	if after := counterOf(t, g); after.Counter != before.Counter+1 || after.Epoch != before.Epoch {
		t.Fatalf("counter %+v after a renewal, want %+v moved by one", after, before)
	}
}

// TestChangeCounterEpochIsNewAtEveryStart: a server started again over the
// same queue answers another epoch (its counter starts over).
func TestChangeCounterEpochIsNewAtEveryStart(t *testing.T) {
	t.Parallel()
	f, _, _ := setupWait(t, 0)
	first := counterOf(t, f)
	reg, _ := handlers.NewRegistry(nil, handlers.Env{})
	run := NewMockRunner(gomock.NewController(t))
	again := New(Config{NodeID: "n1", ClusterID: "c1", Queue: f.q, Runner: run, Kinds: reg})
	f2, ts := newFixture(t, again.Handler(), f.q)
	t.Cleanup(ts.Close)
	if second := counterOf(t, f2); second.Epoch == first.Epoch {
		t.Fatalf("epoch %q again after a restart", second.Epoch)
	}
}

// TestChangeCounterMovesWhenTheSecretNamesChange: the names of the secrets
// the agent can resolve are read live (info tells them); a secret added to
// or removed from its directory moves the counter, and reading them again
// unchanged does not.
func TestChangeCounterMovesWhenTheSecretNamesChange(t *testing.T) {
	t.Parallel()
	f, _, _ := setupWait(t, 0)
	var mu sync.Mutex
	names := []string{"db"}
	secrets := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(names)
	}
	reg, _ := handlers.NewRegistry(nil, handlers.Env{})
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Queue: f.q, Runner: NewMockRunner(gomock.NewController(t)), Kinds: reg,
		Secrets: secrets})
	g, ts := newFixture(t, srv.Handler(), f.q)
	t.Cleanup(ts.Close)
	before := counterOf(t, g)
	if again := counterOf(t, g); again != before {
		t.Fatalf("counter %+v with the same secrets, want %+v", again, before)
	}
	mu.Lock()
	names = []string{"api-token", "db"}
	mu.Unlock()
	added := counterOf(t, g)
	if added.Counter <= before.Counter || added.Epoch != before.Epoch {
		t.Fatalf("counter %+v after a secret was added, want it past %+v", added, before)
	}
	mu.Lock()
	names = []string{"api-token"}
	mu.Unlock()
	if removed := counterOf(t, g); removed.Counter <= added.Counter {
		t.Fatalf("counter %+v after a secret was removed, want it past %+v", removed, added)
	}
}
