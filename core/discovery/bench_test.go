package discovery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/gossip"
)

// benchTimings are memberlist's LAN defaults and the timing docs/gossip.md
// recommends for a local network.
var benchTimings = []struct {
	name string
	t    gossip.Timing
}{
	{"lan", gossip.Timing{Profile: gossip.ProfileLAN}},
	{"local", gossip.Timing{Profile: gossip.ProfileLocal, ProbeInterval: 500 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond}},
}

// BenchmarkGossipCoreSeesAgents starts a core's gossip member feeding a
// GossipSource synced into a SQLite store, then 100 agent members (each its
// own memberlist instance on its own loopback port) that join it, and
// reports the time from the first agent's start until the store lists all
// of them. The timer runs through setup too, so that one slow iteration is
// enough for the benchmark (ns/op is not the figure; s_to_see_all is).
func BenchmarkGossipCoreSeesAgents(b *testing.B) {
	const n = 100
	for _, tm := range benchTimings {
		b.Run(fmt.Sprintf("%s/agents=%d", tm.name, n), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += seeAgents(b, n, tm.t)
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s_to_see_all")
		})
	}
}

func seeAgents(b *testing.B, n int, timing gossip.Timing) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	src := NewGossipSource(nil, AllowLoopback())
	core, err := gossip.New(gossip.Config{Name: "core", BindAddr: "127.0.0.1:0", Insecure: true, Timing: timing,
		Meta: gossip.Meta{Role: gossip.RoleCore, API: "127.0.0.1:7410"}, Handler: src.Handle})
	if err != nil {
		b.Fatal(err)
	}
	if err := core.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer core.Stop()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = Watch(ctx, st, nil, func(string) {}, nil, src)
	}()
	defer func() { cancel(); <-watched }()

	began := time.Now()
	agents := make([]*gossip.Service, n)
	for i := range agents {
		id := fmt.Sprintf("n%03d", i)
		a, err := gossip.New(gossip.Config{Name: "bench/" + id, BindAddr: "127.0.0.1:0", Insecure: true, Timing: timing,
			Join: []string{core.Addr()}, Seek: gossip.RoleCore,
			Meta: gossip.Meta{Role: gossip.RoleAgent, Cluster: "bench", Node: id, API: fmt.Sprintf("127.0.0.1:%d", 20000+i)}})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		agents[i] = a
	}
	defer func() {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() { defer wg.Done(); a.Stop() }()
		}
		wg.Wait()
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var count int
		err := st.Read(ctx, func(r store.Reader) error {
			ns, err := r.Nodes(ctx, "bench")
			count = len(ns)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if count == n {
			return time.Since(began)
		}
		if time.Now().After(deadline) {
			b.Fatalf("the store lists %d of %d agents after 2 minutes", count, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
