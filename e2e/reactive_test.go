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
	waitFor(t, 20*time.Second, "node-1 UP with its labels", func() bool {
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
	waitFor(t, 10*time.Second, "DONE in the core", func() bool {
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
