package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// devCluster is a running `muster dev`: alice (operator) and bob (approver)
// from its banner, and its data directory.
type devCluster struct {
	alice, bob *client.Core
	dir        string
	// addr is the core's address the banner exports.
	addr string
	// health is the nodes' health page the banner names (canary-upgrade's
	// gate).
	health string
	cmd    *exec.Cmd
	banner string
}

// startDev starts `muster dev` with extra arguments and reads its banner.
// Its ports are picked free, but another test's probe may hold one for a
// moment: a start that ends with "address already in use" is tried again on
// new ports.
func startDev(t *testing.T, extra ...string) *devCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		d, text, errText := tryStartDev(t, extra...)
		if d != nil {
			return devFromBanner(t, d, text)
		}
		if attempt == 3 || !strings.Contains(errText, "address already in use") {
			t.Fatalf("no banner from muster dev:\n%s", errText)
		}
	}
}

// tryStartDev starts `muster dev` and waits for its banner; when it ends
// first, it returns what it printed on stderr.
func tryStartDev(t *testing.T, extra ...string) (*devCluster, string, string) {
	t.Helper()
	dir := t.TempDir()
	corePort, agentPort := freePort(t), freePort(t)
	args := append([]string{"dev", "--interval", "500ms", "--data-dir", dir,
		"--api-addr", "127.0.0.1:" + strconv.Itoa(corePort), "--agent-port", strconv.Itoa(agentPort),
		"--health-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	banner, ended := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(ended)
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Stop with Ctrl-C") {
				banner <- b.String()
			}
		}
	}()
	select {
	case text := <-banner:
		return &devCluster{dir: dir, cmd: cmd}, text, ""
	case <-ended:
		_ = cmd.Wait()
		return nil, "", stderr.String()
	case <-time.After(120 * time.Second):
		return nil, "", "no banner in 120 s:\n" + stderr.String()
	}
}

// devFromBanner reads the addresses and tokens of d's banner.
func devFromBanner(t *testing.T, d *devCluster, text string) *devCluster {
	t.Helper()
	dir, cmd := d.dir, d.cmd
	addr := regexp.MustCompile(`export MUSTER_ADDR=(\S+)`).FindStringSubmatch(text)
	alice := regexp.MustCompile(`export MUSTER_TOKEN=(\S+)`).FindStringSubmatch(text)
	bob := regexp.MustCompile(`MUSTER_TOKEN=(\S+) \S+ action approve`).FindStringSubmatch(text)
	if addr == nil || alice == nil || bob == nil {
		t.Fatalf("banner lacks the export lines:\n%s", text)
	}
	health := regexp.MustCompile(`canary-upgrade checks: (\S+)`).FindStringSubmatch(text)
	if health == nil {
		t.Fatalf("banner lacks the health page:\n%s", text)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	return &devCluster{alice: client.NewCore(addr[1], alice[1], hc), bob: client.NewCore(addr[1], bob[1], hc), dir: dir, cmd: cmd, banner: text,
		health: health[1], addr: addr[1]}
}

// version is a dev node's version as its example kinds keep it.
func (d *devCluster) version(t *testing.T, node string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, node, "example-state.json"))
	if err != nil {
		return "1.0"
	}
	var st struct{ Version string }
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Version
}

// start plans a stored playbook, starts exactly that plan as alice and has
// bob approve it.
func (d *devCluster) start(t *testing.T, name string, params map[string]string) (*wire.Plan, *wire.Run) {
	t.Helper()
	req := &wire.PlanRequest{ClusterID: "dev", Params: params}
	plan, err := d.alice.PlanPlaybook(ctxT(t), name, req)
	if err != nil {
		t.Fatalf("plan %s: %v", name, err)
	}
	req.Digest = plan.Digest
	run, err := d.alice.StartPlaybook(ctxT(t), name, req)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	if _, err := d.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatalf("approve %s: %v", name, err)
	}
	return plan, run
}

func (d *devCluster) wait(t *testing.T, id string, within time.Duration, states ...string) *wire.Run {
	t.Helper()
	var end *wire.Run
	testwait.Within(t, within, "run "+id+" in "+strings.Join(states, " or "), func() bool {
		r, err := d.alice.Run(ctxT(t), id)
		if err != nil {
			return false
		}
		for _, s := range states {
			if r.State == s {
				end = r
				return true
			}
		}
		return false
	})
	return end
}

// TestDevRunsEveryShippedPlaybook is the end-to-end test 8: on a
// `muster dev` cluster (node-1 primary, node-2 and node-3 replicas, the
// example kinds), every shipped playbook applies, plans and runs to the end
// its description promises.
func TestDevRunsEveryShippedPlaybook(t *testing.T) {
	t.Parallel()
	d := startDev(t, "--agents", "3")
	files, err := filepath.Glob(filepath.Join("..", "configs", "playbooks", "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("shipped playbooks: %v, %v", files, err)
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.alice.ApplyPlaybook(ctxT(t), string(doc)); err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
	}
	// The labels reach the core with the agents' info.
	testwait.Within(t, 20*time.Second, "the dev nodes' role labels", func() bool {
		plan, err := d.alice.PlanPlaybook(ctxT(t), "rolling-restart", &wire.PlanRequest{ClusterID: "dev"})
		return err == nil && len(plan.Stages) == 2 && len(plan.Stages[0].Nodes) == 2 && len(plan.Stages[1].Nodes) == 1
	})

	// backup-all: every node, DONE.
	_, r := d.start(t, "backup-all", nil)
	if end := d.wait(t, r.ID, 60*time.Second, "DONE", "PARTIAL", "FAILED", "CANCELLED"); end.State != "DONE" {
		t.Fatalf("backup-all ended %s (%s)", end.State, end.StateReason)
	}

	// drain-upgrade-verify: both replicas at 2.0, the primary untouched.
	plan, r := d.start(t, "drain-upgrade-verify", map[string]string{"version": "2.0"})
	if st := plan.Stages[0]; len(st.Steps) != 4 || len(st.Rollback) != 1 || strings.Join(st.Nodes, ",") != "node-2,node-3" {
		t.Fatalf("drain-upgrade-verify's plan: %+v", st)
	}
	if end := d.wait(t, r.ID, 90*time.Second, "DONE", "PARTIAL", "FAILED", "CANCELLED", "PAUSED"); end.State != "DONE" {
		t.Fatalf("drain-upgrade-verify ended %s (%s)", end.State, end.StateReason)
	}
	for node, want := range map[string]string{"node-1": "1.0", "node-2": "2.0", "node-3": "2.0"} {
		if v := d.version(t, node); v != want {
			t.Fatalf("%s at %s after drain-upgrade-verify, want %s", node, v, want)
		}
	}

	// rolling-restart: every node restarted and healthy, DONE.
	_, r = d.start(t, "rolling-restart", map[string]string{"service": "nginx"})
	if end := d.wait(t, r.ID, 90*time.Second, "DONE", "PARTIAL", "FAILED", "CANCELLED", "PAUSED"); end.State != "DONE" {
		t.Fatalf("rolling-restart ended %s (%s)", end.State, end.StateReason)
	}

	// canary-upgrade: after the first replica the run waits for its
	// promote while the core watches the canary's health gate; held for
	// auto_promote_after_s, the canary promotes itself (no person) and the
	// other replica follows.
	_, r = d.start(t, "canary-upgrade", map[string]string{"version": "3.0", "health_url": d.health})
	paused := d.wait(t, r.ID, 60*time.Second, "PAUSED", "DONE", "PARTIAL", "FAILED", "CANCELLED", "ABORTED")
	if paused.State != "PAUSED" || !strings.Contains(paused.StateReason, "canary") {
		t.Fatalf("canary-upgrade: %s (%s), want PAUSED after its canary", paused.State, paused.StateReason)
	}
	if d.version(t, "node-2") != "3.0" || d.version(t, "node-3") != "2.0" {
		t.Fatalf("at the canary pause: node-2 %s, node-3 %s; want only the canary upgraded", d.version(t, "node-2"), d.version(t, "node-3"))
	}
	if _, err := d.alice.RunVerb(ctxT(t), r.ID, "promote", ""); client.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("the requester promoting her own canary: %v, want 403", err)
	}
	end := d.wait(t, r.ID, 90*time.Second, "DONE", "PARTIAL", "FAILED", "CANCELLED", "ABORTED")
	if end.State != "DONE" || !strings.HasPrefix(end.Stages[0].PromotedBy, "promoted by the rule auto_promote_after_s") {
		t.Fatalf("canary-upgrade ended %s (%s), promoted by %q", end.State, end.StateReason, end.Stages[0].PromotedBy)
	}
	if d.version(t, "node-3") != "3.0" || d.version(t, "node-1") != "1.0" {
		t.Fatalf("after the promote: node-3 %s, node-1 %s", d.version(t, "node-3"), d.version(t, "node-1"))
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
}

// With --fail upgrade@node-3, drain-upgrade-verify on a dev cluster upgrades
// node-2, fails on node-3, undrains it and pauses: the documented way to
// watch a failure.
func TestDevFailFlagFailsTheChosenNode(t *testing.T) {
	t.Parallel()
	d := startDev(t, "--agents", "3", "--fail", "upgrade@node-3")
	doc, err := os.ReadFile(filepath.Join("..", "configs", "playbooks", "drain-upgrade-verify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.alice.ApplyPlaybook(ctxT(t), string(doc)); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 20*time.Second, "the dev nodes' role labels", func() bool {
		plan, err := d.alice.PlanPlaybook(ctxT(t), "drain-upgrade-verify", &wire.PlanRequest{ClusterID: "dev",
			Params: map[string]string{"version": "2.0"}})
		return err == nil && len(plan.Stages) == 1 && len(plan.Stages[0].Nodes) == 2
	})
	_, r := d.start(t, "drain-upgrade-verify", map[string]string{"version": "2.0"})
	end := d.wait(t, r.ID, 90*time.Second, "PAUSED", "DONE", "PARTIAL", "FAILED", "CANCELLED")
	if end.State != "PAUSED" {
		t.Fatalf("run %s (%s), want PAUSED on node-3's upgrade", end.State, end.StateReason)
	}
	if d.version(t, "node-2") != "2.0" || d.version(t, "node-3") != "1.0" {
		t.Fatalf("node-2 %s, node-3 %s; want node-2 upgraded, node-3 not", d.version(t, "node-2"), d.version(t, "node-3"))
	}
	b, err := os.ReadFile(filepath.Join(d.dir, "node-3", "example-state.json"))
	if err != nil || !strings.Contains(string(b), `"drained":false`) {
		t.Fatalf("node-3 after its failure: %s, %v; want it undrained", b, err)
	}
}

// syncBuffer is a bytes.Buffer that a process's output and the test may use
// at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
