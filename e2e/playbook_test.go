package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// workFleet is four agents labelled node-1 primary, node-2…4 replica, with
// every kind the example playbooks use, each one shell script that logs
// "start|end KIND ACTION NODE NANOS" and fails where the fail-on file lists
// "KIND NODE".
type workFleet struct {
	*fleet
	log, failOn string
	// carol is an operator's secret, for the CLI.
	carol string
}

var exampleKinds = []string{"example.com/service.restart", "example.com/service.health", "example.com/db.backup",
	"example.com/node.drain", "example.com/node.undrain", "example.com/node.upgrade", "example.com/node.verify"}

func newWorkFleet(t *testing.T) *workFleet {
	t.Helper()
	dir := t.TempDir()
	log, failOn := filepath.Join(dir, "work.log"), filepath.Join(dir, "fail-on")
	script := filepath.Join(dir, "work.sh")
	body := fmt.Sprintf(`#!/bin/sh
echo "start $MUSTER_ACTION_KIND $MUSTER_ACTION_ID $MUSTER_NODE_ID $(date +%%s%%N)" >> %[1]q
sleep 0.2
echo "end $MUSTER_ACTION_KIND $MUSTER_ACTION_ID $MUSTER_NODE_ID $(date +%%s%%N)" >> %[1]q
if grep -qx "$MUSTER_ACTION_KIND $MUSTER_NODE_ID" %[2]q 2>/dev/null; then echo "failing on purpose"; exit 3; fi
`, log, failOn)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var kinds strings.Builder
	kinds.WriteString("actions:\n  external:\n")
	for _, k := range exampleKinds {
		fmt.Fprintf(&kinds, "    - kind: %s\n      run: [%q]\n", k, script)
	}
	f := newFleetWith(t, fleetOptions{nodes: 4, actionsYAML: kinds.String(), dir: filepath.Join(dir, "fleet"),
		agentYAML: func(node string) string {
			if node == "node-1" {
				return "labels:\n  role: primary\n"
			}
			return "labels:\n  role: replica\n"
		}})
	// The core knows the labels once it has synced every agent's info.
	testwait.Within(t, 20*time.Second, "every node's labels", func() bool {
		nodes, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.Labels["role"] == "" {
				return false
			}
		}
		return len(nodes) == 4
	})
	sec, err := f.admin.CreateToken(ctxT(t), "carol", []string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	return &workFleet{fleet: f, log: log, failOn: failOn, carol: sec.Token}
}

// work is one execution, from the scripts' own log.
type work struct {
	kind, id, node string
	start, end     int64
}

func (f *workFleet) works(t *testing.T) []work {
	t.Helper()
	byID := map[string]*work{}
	var order []string
	for _, l := range lines(f.log) {
		fs := strings.Fields(l)
		if len(fs) != 5 {
			continue
		}
		var ns int64
		fmt.Sscan(fs[4], &ns)
		switch fs[0] {
		case "start":
			if byID[fs[2]] != nil {
				t.Fatalf("action %s started twice", fs[2])
			}
			byID[fs[2]] = &work{kind: fs[1], id: fs[2], node: fs[3], start: ns}
			order = append(order, fs[2])
		case "end":
			if w := byID[fs[2]]; w != nil {
				w.end = ns
			}
		}
	}
	out := make([]work, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func spansOf(ws []work, kind string) []span {
	var out []span
	for _, w := range ws {
		if w.kind == kind {
			out = append(out, span{id: w.id, node: w.node, start: w.start, end: w.end})
		}
	}
	return out
}

// applyExample applies configs/playbooks/NAME.yaml through the real CLI.
func (f *workFleet) applyExample(t *testing.T, name string) {
	t.Helper()
	out := f.cli(t, "playbook", "apply", filepath.Join("..", "configs", "playbooks", name+".yaml"))
	if !strings.Contains(out, "Applied playbook "+name+" version 1") {
		t.Fatalf("apply printed %q", out)
	}
}

// cli runs the muster binary as carol (an operator) and returns its output.
func (f *workFleet) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "MUSTER_ADDR=http://"+f.core.Addr(), "MUSTER_TOKEN="+f.carol)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runPlaybook plans NAME with params, starts it, has bob approve it, waits
// until it is final or PAUSED, and checks that the children it made are
// exactly the plan: the same stage, wave, node and (for a one-step stage)
// kind and args for each.
func (f *workFleet) runPlaybook(t *testing.T, name string, params map[string]string, within time.Duration, kill func()) *wire.Run {
	t.Helper()
	req := &wire.PlanRequest{ClusterID: "e2e", Params: params}
	plan, err := f.alice.PlanPlaybook(ctxT(t), name, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Digest = plan.Digest // start what the plan showed
	run, err := f.alice.StartPlaybook(ctxT(t), name, req)
	if err != nil {
		t.Fatal(err)
	}
	if run.Playbook != name || run.PlaybookVersion != 1 || run.Digest != plan.Digest {
		t.Fatalf("run %s v%d digest %s; want %s v1 with the plan's digest %s", run.Playbook, run.PlaybookVersion, run.Digest, name, plan.Digest)
	}
	if _, err := f.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	if kill != nil {
		kill()
	}
	var end *wire.Run
	testwait.Within(t, within, "the run to end", func() bool {
		r, err := f.admin.Run(ctxT(t), run.ID)
		if err != nil || !(r.State == "DONE" || r.State == "PARTIAL" || r.State == "FAILED" || r.State == "CANCELLED" || r.State == "PAUSED") {
			return false
		}
		end = r
		return true
	})
	// Every child made is in the plan, with the plan's wave and args.
	planned := map[string]wire.PlanChild{}
	steps := map[string]wire.PlanChild{}
	for _, c := range plan.Children {
		planned[c.Stage+"/"+c.NodeID] = c
		if c.Step != "" {
			steps[c.Stage+"/"+c.NodeID+"/"+c.Step] = c
		}
	}
	made := 0
	for _, cell := range end.Children {
		if cell.ActionID == "" && len(cell.Steps) == 0 {
			continue
		}
		made++
		p, ok := planned[cell.Stage+"/"+cell.NodeID]
		if !ok || p.Wave != cell.Wave {
			t.Fatalf("child %s/%s in wave %d is not in the plan (%+v)", cell.Stage, cell.NodeID, cell.Wave, p)
		}
		if len(cell.Steps) > 0 {
			// A node of a procedure: each child is one of its planned
			// steps, of the planned kind.
			made += len(cell.Steps) - 1
			for _, sc := range cell.Steps {
				ps, ok := steps[cell.Stage+"/"+cell.NodeID+"/"+sc.Step]
				a, err := f.admin.Action(ctxT(t), sc.ActionID)
				if err != nil {
					t.Fatal(err)
				}
				if ok && a.Kind != ps.Kind {
					t.Fatalf("step %s of %s/%s ran %s; the plan said %s", sc.Step, cell.Stage, cell.NodeID, a.Kind, ps.Kind)
				}
			}
			continue
		}
		a, err := f.admin.Action(ctxT(t), cell.ActionID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != p.Kind || !jsonEqual(a.Args, p.Args) {
			t.Fatalf("child %s/%s ran %s %s; the plan said %s %s", cell.Stage, cell.NodeID, a.Kind, a.Args, p.Kind, p.Args)
		}
	}
	// A DONE run made every planned step and no rollback step.
	nSteps := 0
	for _, c := range plan.Children {
		if !c.Rollback {
			nSteps++
		}
	}
	if end.State == "DONE" && made != nSteps {
		t.Fatalf("a DONE run made %d children; the plan has %d steps", made, nSteps)
	}
	return end
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(ax) == string(by)
}

func TestPlaybookRollingRestart(t *testing.T) {
	t.Parallel()
	f := newWorkFleet(t)
	f.applyExample(t, "rolling-restart")
	plan := f.cli(t, "playbook", "plan", "rolling-restart", "--cluster", "e2e", "--param", "service=nginx")
	for _, want := range []string{"Stage replicas", "Stage primary", `{"service":"nginx"}`, "nothing was created"} {
		if !strings.Contains(plan, want) {
			t.Fatalf("plan output lacks %q:\n%s", want, plan)
		}
	}
	// The core is killed while the replicas roll, and started again.
	kill := func() {
		testwait.Within(t, 30*time.Second, "the second replica to start", func() bool { return len(f.works(t)) >= 2 })
		f.core.kill()
		f.core.restart()
	}
	end := f.runPlaybook(t, "rolling-restart", map[string]string{"service": "nginx"}, 90*time.Second, kill)
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s)", end.State, end.StateReason)
	}
	// Each node restarted once and checked once, in that order; never two
	// restarts at once; the primary last, after the replicas' soak.
	ws := f.works(t)
	if len(ws) != 8 {
		t.Fatalf("%d executions, want a restart and a health check on each of the 4 nodes: %+v", len(ws), ws)
	}
	for i := 0; i < len(ws); i += 2 {
		if ws[i].kind != "example.com/service.restart" || ws[i+1].kind != "example.com/service.health" || ws[i].node != ws[i+1].node {
			t.Fatalf("executions %d and %d are not one node's restart then health: %+v", i, i+1, ws)
		}
		if i > 0 && ws[i].start < ws[i-1].end {
			t.Fatalf("%s restarted before %s's health check ended", ws[i].node, ws[i-1].node)
		}
	}
	if n := maxOverlap(spansOf(ws, "example.com/service.restart")); n != 1 {
		t.Fatalf("%d nodes restarted at once", n)
	}
	primary := ws[6]
	if primary.node != "node-1" {
		t.Fatalf("the primary (node-1) did not go last: %+v", ws)
	}
	if gap := time.Duration(primary.start - ws[5].end); gap < 5*time.Second {
		t.Fatalf("the primary restarted %s after the last replica's health check, within its 5s soak", gap)
	}
}

func TestPlaybookBackupAll(t *testing.T) {
	t.Parallel()
	f := newWorkFleet(t)
	f.applyExample(t, "backup-all")
	if err := os.WriteFile(f.failOn, []byte("example.com/db.backup node-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	end := f.runPlaybook(t, "backup-all", map[string]string{"mode": "incremental"}, 60*time.Second, nil)
	// max_errors 100%: one failed backup does not stop the others, and
	// the run says so: PARTIAL, naming node-2.
	if end.State != "PARTIAL" || end.Summary == nil || len(end.Summary.Failed) != 1 || end.Summary.Failed[0].NodeID != "node-2" {
		t.Fatalf("run ended %s (%s) summary %+v, want PARTIAL naming node-2", end.State, end.StateReason, end.Summary)
	}
	ws := f.works(t)
	nodes := map[string]int{}
	for _, w := range ws {
		nodes[w.node]++
	}
	if len(ws) != 4 || len(nodes) != 4 {
		t.Fatalf("backups per node %v, want every node once", nodes)
	}
	if n := maxOverlap(spansOf(ws, "example.com/db.backup")); n > 2 {
		t.Fatalf("%d backups at once, want at most 2", n)
	}
}

// The shipped drain-upgrade-verify goes node first: each replica drained,
// upgraded, verified and undrained before the next is drained. An upgrade
// failing on node-3 undrains node-3 (when: always), skips its rollback (the
// upgrade never happened), touches no further node, and pauses the run.
func TestPlaybookDrainUpgradeVerifyGoesNodeFirst(t *testing.T) {
	t.Parallel()
	f := newWorkFleet(t)
	f.applyExample(t, "drain-upgrade-verify")
	if err := os.WriteFile(f.failOn, []byte("example.com/node.upgrade node-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.StartPlaybook(ctxT(t), "drain-upgrade-verify", &wire.PlanRequest{ClusterID: "e2e", Version: 1}); err == nil ||
		!strings.Contains(err.Error(), "parameter version is required") {
		t.Fatalf("a start without the required version: %v", err)
	}
	end := f.runPlaybook(t, "drain-upgrade-verify", map[string]string{"version": "2.1"}, 60*time.Second, nil)
	if end.State != "PAUSED" {
		t.Fatalf("run ended %s (%s), want PAUSED by node-3's failure", end.State, end.StateReason)
	}
	var kinds []string
	for _, w := range f.works(t) {
		kinds = append(kinds, strings.TrimPrefix(w.kind, "example.com/node.")+"/"+w.node)
	}
	want := []string{"drain/node-2", "upgrade/node-2", "verify/node-2", "undrain/node-2",
		"drain/node-3", "upgrade/node-3", "undrain/node-3"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("executions %v, want %v", kinds, want)
	}
	ws := f.works(t)
	for i := 1; i < len(ws); i++ {
		if ws[i].start < ws[i-1].end {
			t.Fatalf("%v started before %v ended", ws[i], ws[i-1])
		}
	}
}
