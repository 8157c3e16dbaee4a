package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// fleet is a real core and real agents, each its own process.
type fleet struct {
	t     testing.TB
	core  *proc
	cores []*proc // with replicas: every core replica (core is the first)
	// secrets of the tokens made by token, by name (admin included), for
	// clients of another replica (use) and for signing in to the web UI
	secrets map[string]string
	agents  map[string]*proc
	agentC  map[string]*client.Agent
	dirs    map[string]string // agent data dirs
	alice   *client.Core      // operator
	bob     *client.Core      // approver
	admin   *client.Core
	log     string // the append kind's execution log
}

// newFleet starts n agents (node-1…node-n, with the external kind
// example.com/append that appends its id to a shared log) and a core that
// orchestrates them every second.
func newFleet(t testing.TB, n int, coreExtra string) *fleet {
	t.Helper()
	return newFleetWith(t, fleetOptions{nodes: n, coreExtra: coreExtra})
}

// fleetOptions tunes newFleetWith; zero fields take newFleet's defaults.
type fleetOptions struct {
	nodes     int
	coreExtra string // YAML appended to the core's config
	// actionsYAML replaces the agents' `actions:` section (default: the
	// example.com/append kind).
	actionsYAML string
	// dir holds every config, data directory and process log; "" means
	// t.TempDir() (removed after the test).
	dir string
	// coreAddr gives the address the core is told for a node's agent (a
	// proxy in front of it, say); nil gives the agent's own address.
	coreAddr func(node, agentAddr string) string
	// clusterYAML is added to the cluster's entry in the core's config,
	// indented under it (budget: ...).
	clusterYAML string
	// agentYAML, when set, adds YAML of a node's own to its agent's config
	// (its labels, say).
	agentYAML func(node string) string
	// replicas, when above zero, starts that many core replicas on one
	// fresh PostgreSQL database (lease TTL 2 s) instead of one core on
	// SQLite.
	replicas int
	// dsn, with replicas, is the PostgreSQL database of the replicas; ""
	// means a fresh database on the test binary's shared server.
	dsn string
	// stepKind names the kind of a step fleet's script (default
	// example.com/step).
	stepKind string
	// coreArgs are added to the core's command line.
	coreArgs []string
	// agentBin, when set, is the agents' binary, a muster-agent (default:
	// `muster agent` of the one binary).
	agentBin string
}

func newFleetWith(t testing.TB, o fleetOptions) *fleet {
	t.Helper()
	n := o.nodes
	base := o.dir
	if base == "" {
		base = t.TempDir()
	}
	subdir := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	f := &fleet{t: t, agents: map[string]*proc{}, agentC: map[string]*client.Agent{}, dirs: map[string]string{},
		secrets: map[string]string{}}
	extra := o.actionsYAML
	if extra == "" {
		f.log = filepath.Join(base, "executions.log")
		script := filepath.Join(base, "append.sh")
		body := fmt.Sprintf("#!/bin/sh\necho \"$MUSTER_ACTION_ID $MUSTER_NODE_ID\" >> %q\n", f.log)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		extra = fmt.Sprintf("actions:\n  external:\n    - kind: example.com/append\n      run: [%q]\n", script)
	}
	var nodes strings.Builder
	attempts := make([]func() *proc, n)
	for i := range n {
		id := fmt.Sprintf("node-%d", i+1)
		own := extra
		if o.agentYAML != nil {
			own += o.agentYAML(id)
		}
		f.dirs[id] = subdir(id)
		bin, cmd := binary, []string{"agent"}
		if o.agentBin != "" {
			bin, cmd = o.agentBin, nil
		}
		attempts[i] = agentAttempt(t, bin, cmd, f.dirs[id], id, own)
	}
	started := startAll(t, attempts...) // side by side
	for i, p := range started {
		id := fmt.Sprintf("node-%d", i+1)
		f.agents[id], f.agentC[id] = p, agentClient(p)
		addr := p.Addr()
		if o.coreAddr != nil {
			addr = o.coreAddr(id, addr)
		}
		fmt.Fprintf(&nodes, "      - {id: %s, addr: %q}\n", id, addr)
	}
	nodes.WriteString(o.clusterYAML)
	replicas, storeYAML := 1, ""
	if o.replicas > 0 {
		replicas = o.replicas
		dsn := o.dsn
		if dsn == "" {
			dsn = pgtest.NewDatabase(t)
		}
		storeYAML = fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\nha:\n  lease_ttl: 2s\n", dsn)
	}
	var admin []byte
	for i := range replicas {
		name := "core"
		if i > 0 {
			name = fmt.Sprintf("core-%d", i+1)
		}
		dir := subdir(name)
		path := filepath.Join(dir, "core.yaml")
		p := startOnFreePort(t, dir, name, func(port int) []string {
			cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
clusters:
  - id: e2e
    nodes:
%sorchestrate:
  interval: 1s
  compare_ids_every: 2
  agent_timeout: 2s
%s%s`, filepath.Join(dir, "data"), port, nodes.String(), storeYAML, o.coreExtra)
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			return append([]string{"core", "--config", path}, o.coreArgs...)
		})
		f.cores = append(f.cores, p)
		if b, err := os.ReadFile(filepath.Join(dir, "data", "admin.token")); err == nil {
			admin = b
		}
	}
	f.core = f.cores[0]
	if admin == nil {
		t.Fatal("no core wrote admin.token")
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	f.secrets["admin"] = strings.TrimSpace(string(admin))
	f.admin = client.NewCore("http://"+f.core.Addr(), f.secrets["admin"], hc)
	f.alice = f.token("alice", "operator")
	f.bob = f.token("bob", "approver")
	testwait.Within(t, 20*time.Second, "every node UP", func() bool {
		nodes, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil || len(nodes) != n {
			return false
		}
		for _, nd := range nodes {
			if nd.Status != "UP" {
				return false
			}
		}
		return true
	})
	return f
}

func (f *fleet) token(name, role string) *client.Core {
	f.t.Helper()
	sec, err := f.admin.CreateToken(ctxT(f.t), name, []string{role})
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets[name] = sec.Token
	return client.NewCore("http://"+f.core.Addr(), sec.Token, &http.Client{Timeout: 10 * time.Second})
}

// use points admin, alice and bob at core replica i.
func (f *fleet) use(i int) {
	hc := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + f.cores[i].Addr()
	f.admin = client.NewCore(url, f.secrets["admin"], hc)
	f.alice = client.NewCore(url, f.secrets["alice"], hc)
	f.bob = client.NewCore(url, f.secrets["bob"], hc)
}

// holder returns the index of the core replica holding the e2e cluster's
// lease, as the replica f's clients talk to sees it (-1: none, or no answer).
func (f *fleet) holder() int {
	rs, err := f.admin.Replicas(ctxT(f.t))
	if err != nil {
		return -1
	}
	for _, r := range rs.Replicas {
		for _, l := range r.Leases {
			if l.ClusterID != "e2e" || !r.Live {
				continue
			}
			for i, c := range f.cores {
				if c.Addr() == r.Addr {
					return i
				}
			}
		}
	}
	return -1
}

func (f *fleet) create(node, kind, args string) *action.Action {
	f.t.Helper()
	a, err := f.alice.CreateAction(ctxT(f.t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: node, Kind: kind, Args: json.RawMessage(args)})
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
	return a
}

func (f *fleet) approve(id string) {
	f.t.Helper()
	if _, err := f.bob.Approve(ctxT(f.t), id); err != nil {
		f.t.Fatalf("approve %s: %v", id, err)
	}
}

// waitCore waits until the core reports the action in one of want.
func (f *fleet) waitCore(id string, within time.Duration, want ...action.State) *action.Action {
	f.t.Helper()
	var got *action.Action
	testwait.Within(f.t, within, fmt.Sprintf("core: action %s in %v", id, want), func() bool {
		a, err := f.admin.Action(ctxT(f.t), id)
		if err != nil {
			return false
		}
		got = a
		for _, w := range want {
			if a.State == w {
				return true
			}
		}
		return false
	})
	return got
}

func (f *fleet) nodeStatus(node string) string {
	nodes, err := f.admin.Nodes(ctxT(f.t), "e2e")
	if err != nil {
		return ""
	}
	for _, n := range nodes {
		if n.ID == node {
			return n.Status
		}
	}
	return ""
}

func (f *fleet) hasEvent(typ, actionID string) bool {
	list, err := f.admin.Events(ctxT(f.t), 0, 500, client.EventFilter{ActionID: actionID})
	if err != nil {
		return false
	}
	for _, e := range list.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// passes reads how many orchestration passes the core has run, from /metrics.
func (f *fleet) passes() float64 {
	resp, err := http.Get("http://" + f.core.Addr() + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var total float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "muster_core_orchestrate_passes_total") {
			if v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64); err == nil {
				total += v
			}
		}
	}
	return total
}

// executions counts the lines of the execution log per action id.
func (f *fleet) executions() map[string]int {
	out := map[string]int{}
	for _, l := range lines(f.log) {
		out[strings.Fields(l)[0]]++
	}
	return out
}

// 1. Four-eyes approval, then DONE within two intervals.
func TestCoreApprovalFlow(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "")
	a := f.create("node-2", "muster.io/debug.ping", `{}`)
	if a.State != action.PendingApprove || a.Requester != "alice" {
		t.Fatalf("created %+v", a)
	}
	_, err := f.alice.Approve(ctxT(t), a.ID)
	if client.StatusOf(err) != 403 {
		t.Fatalf("self-approval: %v, want 403", err)
	}
	approvedAt := time.Now()
	f.approve(a.ID)
	done := f.waitCore(a.ID, 10*time.Second, action.Done)
	// The approval nudges a sync at once; a generous bound, since how soon
	// is a figure of make bench, not of a loaded test machine.
	if took := time.Since(approvedAt); took > 8*time.Second {
		t.Fatalf("DONE %s after approval, want well within the 10 s a nudge-less wait would take", took)
	}
	if done.ApprovedBy != "bob" || done.Output != "pong\n" {
		t.Fatalf("done record %+v", done)
	}
}

// 2 and 3. An action queued directly on an agent is imported with origin
// agent; the same id queued on the agent with other content before the core
// pushes its own ends with the agent's version and an action.conflict event.
func TestCoreImportsAgentActionsAndTheAgentWinsConflicts(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "")
	direct, status, err := f.agentC["node-1"].Push(ctxT(t), &wire.PushRequest{Kind: "muster.io/debug.ping"})
	if err != nil || status != 201 {
		t.Fatalf("direct push: %d %v", status, err)
	}
	imported := f.waitCore(direct.ID, 10*time.Second, action.Done)
	if imported.Origin != action.OriginAgent || imported.NodeID != "node-1" {
		t.Fatalf("imported %+v", imported)
	}

	mine := f.create("node-3", "muster.io/debug.sleep", `{"seconds":0.1}`)
	theirs, status, err := f.agentC["node-3"].Push(ctxT(t), &wire.PushRequest{ID: mine.ID, Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":0.2}`)})
	if err != nil || status != 201 {
		t.Fatalf("conflicting push: %d %v", status, err)
	}
	f.approve(mine.ID)
	got := f.waitCore(mine.ID, 10*time.Second, action.Done)
	if string(got.Args) != string(theirs.Args) {
		t.Fatalf("core args %s, want the agent's %s", got.Args, theirs.Args)
	}
	testwait.Within(t, 10*time.Second, "an action.conflict event", func() bool { return f.hasEvent("action.conflict", mine.ID) })
}

// 4. A killed agent turns DOWN and its approved action waits; after the
// restart the action runs exactly once.
func TestCoreWaitsForAKilledAgentAndRunsTheActionOnce(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "")
	f.agents["node-2"].kill()
	testwait.Within(t, 10*time.Second, "node-2 DOWN", func() bool { return f.nodeStatus("node-2") == "DOWN" })
	a := f.create("node-2", "example.com/append", `{}`)
	f.approve(a.ID)
	// Three passes go by; the action stays PENDING_SCHEDULE.
	from := f.passes()
	testwait.Within(t, 15*time.Second, "three passes while node-2 is down", func() bool {
		got, err := f.admin.Action(ctxT(t), a.ID)
		if err != nil || got.State != action.PendingSchedule {
			t.Fatalf("while down: %+v %v", got, err)
		}
		return f.passes() >= from+3
	})
	f.agents["node-2"].restart()
	f.waitCore(a.ID, 15*time.Second, action.Done)
	testwait.Within(t, 10*time.Second, "node-2 UP", func() bool { return f.nodeStatus("node-2") == "UP" })
	if n := f.executions()[a.ID]; n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}
}

// 5. An agent whose database was deleted while it ran an action: the core
// marks that action LOST.
func TestCoreMarksActionsLostWhenAnAgentLosesItsDatabase(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "approval:\n  default: none\n")
	a := f.create("node-1", "muster.io/debug.sleep", `{"seconds":3600}`)
	f.waitCore(a.ID, 10*time.Second, action.Running)
	f.agents["node-1"].kill()
	if err := os.RemoveAll(filepath.Join(f.dirs["node-1"], "data")); err != nil {
		t.Fatal(err)
	}
	f.agents["node-1"].restart()
	lost := f.waitCore(a.ID, 15*time.Second, action.Lost)
	if !f.hasEvent("action.lost", lost.ID) {
		t.Fatal("no action.lost event")
	}
}

// 6. The core killed with SIGKILL during a busy period and restarted: every
// action still reaches a final state, and none runs twice.
func TestCoreSIGKILLDuringBusyPeriod(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "approval:\n  default: none\n")
	var ids []string
	var mu sync.Mutex
	for i := 0; i < 30; i++ {
		node := fmt.Sprintf("node-%d", i%3+1)
		a := f.create(node, "example.com/append", `{}`)
		mu.Lock()
		ids = append(ids, a.ID)
		mu.Unlock()
		if i == 15 {
			f.core.kill()
			f.core.restart()
		}
	}
	for _, id := range ids {
		f.waitCore(id, 30*time.Second, action.Done)
	}
	runs := f.executions()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("action %s ran %d times, want once", id, runs[id])
		}
	}
}

// 7. Cancelling a running sleep through the core ends it CANCELLED on the
// agent and in the core.
func TestCoreCancelsARunningAction(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, "approval:\n  default: none\n")
	a := f.create("node-3", "muster.io/debug.sleep", `{"seconds":3600}`)
	f.waitCore(a.ID, 10*time.Second, action.Running)
	if _, _, err := f.alice.Cancel(ctxT(t), a.ID); err != nil {
		t.Fatal(err)
	}
	f.waitCore(a.ID, 10*time.Second, action.Cancelled)
	onAgent, err := f.agentC["node-3"].Get(ctxT(t), a.ID)
	if err != nil || onAgent.State != action.Cancelled {
		t.Fatalf("on the agent: %+v %v", onAgent, err)
	}
}
