package agent

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/sqlite"
	"github.com/musterhq/muster/shared/wire"
)

// commitsPerPing is how many transactions one ping costs the agent: accept,
// claim (NEW → RUNNING), finish (RUNNING → DONE).
const commitsPerPing = 3

// rawCommitRate measures single-row transactions per second with the
// agent's own settings (WAL, synchronous=FULL) in dir.
func rawCommitRate(b *testing.B, dir string, n int) float64 {
	b.Helper()
	mig := fstest.MapFS{"001_t.sql": {Data: []byte(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)}}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "raw.db"), mig)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	for i := 0; i < n; i++ {
		err := db.InTx(context.Background(), func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, "x")
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkQueueThroughput pushes b.N pings to a real agent over HTTP and
// waits until all are DONE; beside it, the raw commit rate on the same disk.
// ratio = actions/s ÷ (raw commits/s ÷ commits per action); the goal is ≥ 0.8.
func BenchmarkQueueThroughput(b *testing.B) {
	dir := b.TempDir()
	// The raw rate is measured before and after the agent's run, and
	// averaged, so that a noisy neighbour skews both figures alike.
	raw := rawCommitRate(b, dir, max(200, b.N))
	var perS float64
	defer func() {
		raw = (raw + rawCommitRate(b, dir, max(200, b.N))) / 2
		b.ReportMetric(raw, "sqlite_commits_per_s")
		b.ReportMetric(perS/(raw/commitsPerPing), "agent_queue_ratio")
	}()

	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "bench", "bench", filepath.Join(dir, "agent")
	cfg.API.Addr, cfg.API.Insecure = "127.0.0.1:0", true
	ag, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-ag.Ready()
	c := client.NewAgent(ag.Addr().String(), &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}})

	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, st, err := c.Push(ctx, &wire.PushRequest{ID: action.NewID(), Kind: "muster.io/debug.ping"}); err != nil || st != 201 {
					b.Errorf("push: %d %v", st, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for {
		info, err := c.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if info.Queue[action.Done] >= b.N {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	perS = float64(b.N) / elapsed.Seconds()
	b.ReportMetric(perS, "agent_actions_per_s")
}
