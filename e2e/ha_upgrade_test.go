package e2e

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestHARollingUpgradeOneReplicaAtATime: three replicas on PostgreSQL,
// three clusters, actions created and approved without a pause all along.
// Each replica in turn is stopped (SIGTERM, as systemctl stop and a
// package's try-restart send) and started again from a newer binary, as
// `apt-get install muster` does on one machine after another: the next
// only once the upgraded one serves and holds its share again. Watched
// every 100 ms, no cluster is without a live holder for longer than the
// lease TTL; every action approved is DONE and ran exactly once; at the
// end every replica reports the new version.
func TestHARollingUpgradeOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	const newVersion = "v2.0.0-e2e"
	newer := buildVersion(t, t.TempDir(), "muster", newVersion)
	f := newHAFleet(t, 3, 3)
	testwait.Within(t, 20*time.Second, "a 1/1/1 spread of the leases", func() bool {
		who, _, ok := f.holders(0)
		return ok && len(who) == 3 && equalInts(counts(who, 3), 1, 1, 1)
	})
	rs, err := f.client(0, "admin").Replicas(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Replicas {
		if r.Version == newVersion {
			t.Fatalf("replica %s runs %s before the upgrade", r.ID, r.Version)
		}
	}

	// down is the replica being replaced (-1: none). The flow and the
	// watch use the others only; the upgrade takes mu to change it, so no
	// request of theirs is under way to the replica it stops.
	var (
		mu      sync.RWMutex
		down    = -1
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		ids     []string
		flowErr error
		// the longest time each cluster went without a live holder
		gap = map[string]time.Duration{}
	)
	up := func(n int) int {
		if n == down {
			return (n + 1) % 3
		}
		return n
	}
	wg.Add(2)
	go func() { // the flow: an action every 50 ms at most, round the clusters
		defer wg.Done()
		pace := time.NewTicker(50 * time.Millisecond)
		defer pace.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			mu.RLock()
			via := up(n % 3)
			cluster := fmt.Sprintf("c%d", n%3+1)
			a, err := f.client(via, "alice").CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: cluster,
				NodeID: fmt.Sprintf("node-%d", n%3+1), Kind: "example.com/append", Args: json.RawMessage(`{}`)})
			if err == nil {
				_, err = f.client(via, "bob").Approve(ctxT(t), a.ID)
			}
			mu.RUnlock()
			if err != nil {
				flowErr = fmt.Errorf("create and approve on %s through core-%d: %w", cluster, via, err)
				return
			}
			ids = append(ids, a.ID)
		}
	}()
	go func() { // the watch
		defer wg.Done()
		// A cluster held by a running replica at some moment of one
		// answer and again at some moment of the next was without one for
		// at most the time between the first's end and the second's start
		// (a slow answer on a busy machine is not counted as a loss).
		lastEnd := map[string]time.Time{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.RLock()
			stopped := down
			asked := time.Now()
			who, _, ok := f.holders(up(0))
			answered := time.Now()
			mu.RUnlock()
			if !ok {
				continue
			}
			for _, c := range []string{"c1", "c2", "c3"} {
				// A lease of the replica being replaced is no holder:
				// it is stopping, stopped or starting.
				if h, held := who[c]; !held || h == stopped {
					continue
				}
				if end, seen := lastEnd[c]; seen && asked.Sub(end) > gap[c] {
					gap[c] = asked.Sub(end)
				}
				lastEnd[c] = answered
			}
		}
	}()

	for i := range f.cores {
		mu.Lock()
		down = i
		mu.Unlock()
		if code := f.cores[i].stop(); code != 0 {
			t.Errorf("core-%d exited %d on SIGTERM:\n%s", i, code, f.cores[i].logs())
		}
		f.cores[i].bin = newer
		f.cores[i].restart()
		testwait.Within(t, 20*time.Second, fmt.Sprintf("core-%d upgraded and holding its share", i), func() bool {
			rs, err := f.client(i, "admin").Replicas(ctxT(t))
			if err != nil {
				return false
			}
			who, _, ok := f.holders(i)
			for _, r := range rs.Replicas {
				if r.ID == fmt.Sprintf("core-%d", i) {
					return r.Version == newVersion && ok && len(who) == 3 && equalInts(counts(who, 3), 1, 1, 1)
				}
			}
			return false
		})
		mu.Lock()
		down = -1
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	if flowErr != nil {
		t.Fatal(flowErr)
	}
	for c, d := range gap {
		t.Logf("%s: at most %s without a live holder (lease TTL %s)", c, d.Round(10*time.Millisecond), haTTL)
		if d > haTTL {
			t.Errorf("%s went %s without a live holder, longer than the lease TTL %s", c, d.Round(10*time.Millisecond), haTTL)
		}
	}
	byCluster := map[string][]string{}
	for n, id := range ids {
		c := fmt.Sprintf("c%d", n%3+1)
		byCluster[c] = append(byCluster[c], id)
	}
	t.Logf("%d actions approved during the upgrade", len(ids))
	for c, l := range byCluster {
		f.waitDone(0, c, l, time.Minute)
	}
	f.onceEach(ids)
	rs, err = f.client(0, "admin").Replicas(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, r := range rs.Replicas {
		if r.Live {
			live++
			if r.Version != newVersion {
				t.Errorf("replica %s reports %s, want %s", r.ID, r.Version, newVersion)
			}
		}
	}
	if live != 3 {
		t.Errorf("%d live replicas after the upgrade, want 3: %+v", live, rs.Replicas)
	}
}
