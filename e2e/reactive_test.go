package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// metric sums the samples of one series (every label set) on the core's
// /metrics whose labels contain match.
func metric(t testing.TB, coreAddr, name, match string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + coreAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var total float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) && strings.Contains(l, match) {
			if v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64); err == nil {
				total += v
			}
		}
	}
	return total
}

// Reactive progress with real processes: a core and an agent in one gossip
// pool, passes every 30 s. The agent's labels reach the core (node list,
// label filter). An action created there is pushed at once (a sync of its
// node, not a pass), and when it finishes, the agent's "changed" note makes
// the core see DONE within a couple of seconds, not at the next pass.
func TestReactiveProgressWithGossip(t *testing.T) {
	t.Parallel()
	p := newPool(t, gossipTiming, 30*time.Second)
	extra := fmt.Sprintf("labels:\n  role: replica\n  zone: eu-1\ngossip:\n  enabled: true\n  bind_addr: 127.0.0.1:%d\n  join: [%q]\n  key_file: %s\n%s",
		freePort(t), p.coreGossip, p.key, gossipTiming)
	agentProc(t, "node-1", extra)
	testwait.Within(t, 20*time.Second, "node-1 UP with its labels", func() bool {
		n, ok := p.nodes()["node-1"]
		return ok && n.Status == "UP" && n.Labels["role"] == "replica" && n.Labels["zone"] == "eu-1"
	})
	for sel, want := range map[string]int{"role=replica": 1, "role=primary": 0} {
		list, err := p.admin.Nodes(ctxT(t), "e2e", sel, "zone=eu-1")
		if err != nil || len(list) != want {
			t.Fatalf("nodes with %s: %v, %v", sel, list, err)
		}
	}

	passes := metric(t, p.core.Addr(), "muster_core_orchestrate_passes_total", "")
	synced := metric(t, p.core.Addr(), "muster_core_orchestrate_nudged_syncs_total", `result="wrote"`)
	created := time.Now()
	a, err := p.admin.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-1",
		Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	var done *action.Action
	testwait.Within(t, 10*time.Second, "DONE in the core", func() bool {
		got, err := p.admin.Action(ctxT(t), a.ID)
		done = got
		return err == nil && got.State == action.Done
	})
	seen := time.Since(created)
	// Pushed at once and seen finished at once: 1 s of sleep, plus a
	// margin, far from the 30 s interval.
	if seen > 5*time.Second {
		t.Fatalf("DONE seen %s after creation", seen)
	}
	if done.FinishedTS == nil || done.StartedTS == nil || done.FinishedTS.Sub(*done.StartedTS) < time.Second {
		t.Fatalf("record %+v", done)
	}
	if got := metric(t, p.core.Addr(), "muster_core_orchestrate_passes_total", ""); got != passes {
		t.Fatalf("%v passes ran meanwhile: the progress came from a pass, not from node syncs", got-passes)
	}
	// The push and the DONE: two node syncs that wrote.
	if got := metric(t, p.core.Addr(), "muster_core_orchestrate_nudged_syncs_total", `result="wrote"`); got < synced+2 {
		t.Fatalf("%v node syncs wrote, want at least 2", got-synced)
	}
}

// Reactive progress carries runs too (the fifth end-to-end case):
// with passes every 30 s and gossip on, a 3-stage run over 3 nodes ends in
// a few seconds, not in 90: each child's end is a note, the note a sync of
// its node, and the sync creates the next wave. The children sleep 1 s, so
// that no pass that pushes one can also see it end.
func TestReactiveProgressCarriesARun(t *testing.T) {
	t.Parallel()
	p := newPool(t, gossipTiming, 30*time.Second)
	for i := 1; i <= 3; i++ {
		p.agent(fmt.Sprintf("node-%d", i), "", gossipTiming)
	}
	testwait.Within(t, 20*time.Second, "three nodes UP", func() bool {
		up := 0
		for _, n := range p.nodes() {
			if n.Status == "UP" {
				up++
			}
		}
		return up == 3
	})
	all := limit.MustParse("100%")
	req := &wire.CreateRunRequest{ClusterID: "e2e"}
	for _, name := range []string{"first", "second", "third"} {
		req.Stages = append(req.Stages, wire.StageSpec{Name: name, Kind: "muster.io/debug.sleep",
			Args: json.RawMessage(`{"seconds":1}`), Target: wire.Target{All: true}, MaxConcurrency: &all})
	}
	started := time.Now()
	r, err := p.admin.CreateRun(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var got *wire.Run
	testwait.Within(t, 20*time.Second, "the run to end", func() bool {
		got, err = p.admin.Run(ctxT(t), r.ID)
		return err == nil && (got.State == "DONE" || got.State == "FAILED" || got.State == "CANCELLED")
	})
	took := time.Since(started)
	if got.State != "DONE" {
		t.Fatalf("run ended %s (%s)", got.State, got.StateReason)
	}
	t.Logf("3 stages over 3 nodes in %s with a 30 s interval", took.Round(time.Millisecond))
	if took > 12*time.Second {
		t.Fatalf("the run took %s: its waves waited for passes", took)
	}
}
