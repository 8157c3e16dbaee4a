package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// buildAgentVersion builds muster-agent reporting version into dir.
func buildAgentVersion(t *testing.T, dir, version string) string {
	t.Helper()
	return buildVersion(t, dir, "muster-agent", version)
}

// buildVersion builds the command name (muster or muster-agent) reporting
// version into dir.
func buildVersion(t *testing.T, dir, name, version string) string {
	t.Helper()
	out := filepath.Join(dir, name+"-"+version)
	args := []string{"build", "-o", out, "-ldflags", "-X github.com/musterhq/muster/shared/version.Version=" + version}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../cmd/"+name)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", version, err, b)
	}
	return out
}

// exited waits for p to end by itself (not killed by the test).
func exited(t *testing.T, p *proc, within time.Duration) {
	t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s:\n%s", p.name, within, p.logs())
	}
}

// The shipped playbook upgrade-muster-agent.yaml on a real agent: its
// install step, of a restarts_agent kind, replaces the agent's binary and
// restarts the agent as the agent's package's postinst does; the command,
// launched apart from the agent, outlives it, and the new agent records its
// result. The core sees the action DONE and the new version, and the
// verify step, run by the new agent, passes on MUSTER_AGENT_VERSION.
func TestSelfUpgradeFinishesDoneUnderTheNewAgent(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	v1, v2 := buildAgentVersion(t, dir, "1.0.0-e2e"), buildAgentVersion(t, dir, "2.0.0-e2e")
	bin := filepath.Join(dir, "bin", "muster-agent")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", v1, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	sdrun := writeStandInSystemdRun(t, dir)
	pidfile, runs := filepath.Join(dir, "agent.pid"), filepath.Join(dir, "runs.log")
	// The package's stand-in: it puts the new binary in place, then its
	// postinst restarts the agent (SIGTERM, as systemctl try-restart sends;
	// the test restarts it, as systemd's Restart= would).
	upgrade := filepath.Join(dir, "upgrade.sh")
	body := fmt.Sprintf(`#!/bin/sh
set -e
echo "upgrading muster-agent from $MUSTER_AGENT_VERSION"
cp %[1]q %[2]q.new
mv -f %[2]q.new %[2]q
kill -TERM "$(cat %[3]q)"
echo "$MUSTER_ACTION_ID" >> %[4]q
echo "installed"
`, v2, bin, pidfile, runs)
	// verify: the version the agent running it reports is args.version.
	verify := filepath.Join(dir, "verify.sh")
	vbody := `#!/bin/sh
want=$(sed -n 's/.*"args":{"version":"\([^"]*\)"}.*/\1/p')
echo "agent $MUSTER_AGENT_VERSION, want $want"
[ -n "$want" ] && [ "$MUSTER_AGENT_VERSION" = "$want" ]
`
	for path, b := range map[string]string{upgrade: body, verify: vbody} {
		if err := os.WriteFile(path, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newFleetWith(t, fleetOptions{nodes: 1, agentBin: bin, actionsYAML: fmt.Sprintf(`actions:
  systemd_run: %q
  systemctl: /bin/true
  external:
    - kind: example.com/muster-agent.upgrade
      privileges: package-manager
      restarts_agent: true
      run: [%q]
    - kind: example.com/muster-agent.verify
      run: [%q]
`, sdrun, upgrade, verify)})
	p := f.agents["node-1"]
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := f.agentC["node-1"].Info(ctxT(t))
	if err != nil || info.Version != "1.0.0-e2e" {
		t.Fatalf("info before: %+v %v", info, err)
	}

	doc, err := os.ReadFile(filepath.Join("..", "configs", "playbooks", "upgrade-muster-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.ApplyPlaybook(ctxT(t), string(doc)); err != nil {
		t.Fatal(err)
	}
	req := &wire.PlanRequest{ClusterID: "e2e", Params: map[string]string{"package": "muster-agent=2.0.0-e2e", "version": "2.0.0-e2e"}}
	plan, err := f.alice.PlanPlaybook(ctxT(t), "upgrade-muster-agent", req)
	if err != nil {
		t.Fatal(err)
	}
	req.Digest = plan.Digest
	run, err := f.alice.StartPlaybook(ctxT(t), "upgrade-muster-agent", req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	exited(t, p, 30*time.Second)
	p.restart()

	var end *wire.Run
	testwait.Within(t, 40*time.Second, "the run to end", func() bool {
		end, err = f.alice.Run(ctxT(t), run.ID)
		return err == nil && (end.State == "DONE" || end.State == "FAILED" || end.State == "PAUSED" || end.State == "PARTIAL")
	})
	list, err := f.admin.Actions(ctxT(t), client.ActionFilter{Run: run.ID, Kinds: []string{"example.com/muster-agent.upgrade"}})
	if err != nil || len(list.Actions) != 1 {
		t.Fatalf("the run's install actions: %+v %v", list, err)
	}
	installed, err := f.admin.Action(ctxT(t), list.Actions[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if installed.State != action.Done || end.State != "DONE" {
		t.Fatalf("run %s (%s), install %s (%s):\n%s\nagent log:\n%s", end.State, end.StateReason, installed.State, installed.StateReason, installed.Output, p.logs())
	}
	for _, want := range []string{"upgrading muster-agent from 1.0.0-e2e", "installed"} {
		if !strings.Contains(installed.Output, want) {
			t.Fatalf("no %q in the output:\n%s", want, installed.Output)
		}
	}
	testwait.Within(t, 20*time.Second, "the core to see the new version", func() bool {
		nodes, err := f.admin.Nodes(ctxT(t), "e2e")
		return err == nil && len(nodes) == 1 && nodes[0].Version == "2.0.0-e2e"
	})
	info, err = f.agentC["node-1"].Info(ctxT(t))
	if err != nil || info.Version != "2.0.0-e2e" {
		t.Fatalf("info after: %+v %v", info, err)
	}
	if n := len(lines(runs)); n != 1 {
		t.Fatalf("the upgrade ran %d times, want once", n)
	}
	if n := len(lines(sdrun + ".log")); n != 1 {
		t.Fatalf("systemd-run called %d times, want once", n)
	}
}

// An agent that dies after it claimed the launch marker, before it knows
// whether the command started, never launches it again: the next agent
// waits for a result, and with none the action fails at its deadline.
func TestSelfUpgradeCrashBetweenMarkerAndLaunchNeverRunsTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.log")
	script := appendScript(t, runs, "0")
	// systemd-run that kills its caller (the agent) and launches nothing:
	// the agent dies between the marker and the launch.
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\necho call >> \"$0.log\"\nkill -KILL $PPID\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`actions:
  systemd_run: %q
  systemctl: /bin/true
  external:
    - kind: example.com/upgrade-agent
      privileges: package-manager
      restarts_agent: true
      timeout: 3s
      run: [%q]
`, sdrun, script)
	p, ag, _ := agentProcOf(t, agentBinary, nil, dir, "crash-1", extra)
	rec := push(t, ag, "example.com/upgrade-agent", `{}`)
	exited(t, p, 20*time.Second)
	p.restart()
	got := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Done, action.Failed)
	if got.State != action.Failed || got.StateReason != action.ReasonTimeout {
		t.Fatalf("%s (%s), want FAILED at its deadline:\n%s", got.State, got.StateReason, got.Output)
	}
	if !strings.Contains(got.Output, "never launched twice") {
		t.Fatalf("the output does not say why it waited:\n%s", got.Output)
	}
	if n := len(lines(sdrun + ".log")); n != 1 {
		t.Fatalf("systemd-run called %d times, want once", n)
	}
	if n := len(lines(runs)); n != 0 {
		t.Fatalf("the command ran %d times, want never", n)
	}
}
