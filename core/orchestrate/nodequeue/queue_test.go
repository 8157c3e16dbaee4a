package nodequeue

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/musterhq/muster/shared/testwait"
)

// TestRequestsForOneNodeMerge: a node asked for many times before its sync
// starts is handed out once; the order is that of the first requests.
func TestRequestsForOneNodeMerge(t *testing.T) {
	q := New()
	for range 3 {
		q.Add("b")
		q.Add("a")
	}
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
	if got := q.TakeReady(); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("TakeReady = %v, want [b a]", got)
	}
	if got := q.TakeReady(); got != nil {
		t.Fatalf("second TakeReady = %v, want nothing", got)
	}
	q.Done("a")
	q.Done("b")
	if got := q.TakeReady(); got != nil {
		t.Fatalf("after Done without a new request: %v, want nothing", got)
	}
}

// TestNeverTwoSyncsOfOneNodeAtOnce: workers that take nodes from the queue
// (Get, TakeReady) and a sync started beside it (Start) never hold one node
// twice at once, while requests keep coming.
func TestNeverTwoSyncsOfOneNodeAtOnce(t *testing.T) {
	q := New()
	const nodes = 4
	var syncing [nodes]atomic.Int32
	var syncs atomic.Int64
	var twice atomic.Bool
	sync1 := func(n string) {
		var i int
		fmt.Sscanf(n, "n%d", &i)
		if syncing[i].Add(1) != 1 {
			twice.Store(true)
		}
		for range 3 { // "sync" for a while: another worker may run meanwhile
			runtime.Gosched()
		}
		syncs.Add(1)
		syncing[i].Add(-1)
		q.Done(n)
	}
	var wg sync.WaitGroup
	for range 4 { // workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, ok := q.Get()
				if !ok {
					return
				}
				sync1(n)
			}
		}()
	}
	wg.Add(1)
	go func() { // a loop that takes every ready node at once, and starts syncs of its own
		defer wg.Done()
		for i := 0; syncs.Load() < 2000; i++ {
			for _, n := range q.TakeReady() {
				sync1(n)
			}
			if n := fmt.Sprintf("n%d", i%nodes); q.Start(n) {
				sync1(n)
			}
		}
	}()
	for range 2 { // requests
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; syncs.Load() < 2000; i++ {
				q.Add(fmt.Sprintf("n%d", i%nodes))
			}
		}()
	}
	testwait.For(t, "2000 syncs", func() bool { return syncs.Load() >= 2000 })
	q.ShutDown()
	wg.Wait()
	if twice.Load() {
		t.Fatal("a node was synced twice at once")
	}
	first := q.Start("n0")
	second := q.Start("n0")
	if first && second {
		t.Fatal("Start took a node whose sync runs")
	}
}

// TestANodeAskedForDuringItsSyncIsSyncedAgainAfterIt: a request that comes
// while the node's sync runs waits for Done, then the node is ready again,
// once, whatever the number of requests; a sync started outside the queue
// (Start) holds a request the same way.
func TestANodeAskedForDuringItsSyncIsSyncedAgainAfterIt(t *testing.T) {
	q := New()
	q.Add("a")
	if n, ok := q.Get(); !ok || n != "a" {
		t.Fatalf("Get = %q %v", n, ok)
	}
	q.Add("a")
	q.Add("a")
	if got := q.TakeReady(); got != nil {
		t.Fatalf("while a's sync runs: %v ready, want nothing", got)
	}
	if got := q.Waiting(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Waiting = %v, want [a]", got)
	}
	q.Done("a")
	if got := q.TakeReady(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after Done: %v, want [a]", got)
	}
	q.Done("a")

	// A sync of b not asked for through the queue.
	q.Add("b")
	if !q.Start("b") {
		t.Fatal("Start of an idle node refused")
	}
	if got := q.TakeReady(); got != nil {
		t.Fatalf("while b's sync runs: %v ready, want nothing", got)
	}
	q.Done("b")
	if got := q.TakeReady(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after Done: %v, want [b]", got)
	}
}

// TestShutDownWakesEveryGetAndDropsRequests: a Get that waits returns
// false at ShutDown; requests before and after it are dropped.
func TestShutDownWakesEveryGetAndDropsRequests(t *testing.T) {
	q := New()
	var returned atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := q.Get(); !ok {
				returned.Add(1)
			}
		}()
	}
	q.Add("a")
	testwait.For(t, "a handed out", func() bool { return q.Running("a") })
	q.Add("a") // waits for a's Done
	q.ShutDown()
	testwait.For(t, "the waiting Get to return", func() bool { return returned.Load() == 1 })
	wg.Wait()
	if q.Len() != 0 {
		t.Fatalf("Len = %d after ShutDown, want 0", q.Len())
	}
	q.Add("d")
	q.Done("a")
	if got := q.TakeReady(); got != nil {
		t.Fatalf("after ShutDown: %v ready, want nothing", got)
	}
	if n, ok := q.Get(); ok {
		t.Fatalf("Get after ShutDown = %q", n)
	}
}
