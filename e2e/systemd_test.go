package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The paths of the binaries the units in configs/systemd start: the
// agent's unit muster-agent, the core's the one binary muster.
const (
	installedBinary      = "/usr/local/bin/muster"
	installedAgentBinary = "/usr/local/bin/muster-agent"
)

// unitBinary is the binary the unit name starts.
var unitBinary = map[string]string{
	"muster-agent.service": installedAgentBinary,
	"muster-core.service":  installedBinary,
}

// maxExposure is the highest "overall exposure level" systemd-analyze
// security may give a unit, in tenths (0 is locked down, 100 unprotected):
// the units score 15 and 17 today, so removing a protection fails the test.
const maxExposure = "25"

// TestSystemdUnits checks the units in configs/systemd: systemd-analyze
// verify finds nothing wrong, the hardening keeps the exposure level low, and
// the command line they run is one the built binary accepts.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"muster-agent.service", "muster-core.service"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text, err := os.ReadFile(filepath.Join("..", "configs", "systemd", name))
			if err != nil {
				t.Fatal(err)
			}
			if problems := checkUnit(t, name, string(text)); len(problems) > 0 {
				t.Fatalf("%s:\n%s", name, strings.Join(problems, "\n"))
			}
		})
	}
}

// TestSystemdUnitCheckCatchesBreakage feeds checkUnit broken copies of the
// agent's unit: each must be reported.
func TestSystemdUnitCheckCatchesBreakage(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join("..", "configs", "systemd", "muster-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"unknown key", "Restart=on-failure", "Restart=on-failure\nRestartEvery=2s"},
		{"bad value", "ProtectHome=yes", "ProtectHome=perhaps"},
		{"hardening removed", "NoNewPrivileges=yes\nCapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_KILL\n", ""},
		{"unknown flag", "--data-dir", "--data-directory"},
		{"unknown command", "muster-agent --config", "muster-agent agnet --config"},
		{"the one binary", "/usr/local/bin/muster-agent --config", "/usr/local/bin/muster agent --config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			broken := strings.Replace(string(good), tc.old, tc.new, 1)
			if broken == string(good) {
				t.Fatalf("%q is not in the unit", tc.old)
			}
			if problems := checkUnit(t, "muster-agent.service", broken); len(problems) == 0 {
				t.Fatal("a broken unit passed the check")
			}
		})
	}
}

// checkUnit returns what is wrong with the unit text: among others, an
// ExecStart that does not start the unit's binary (unitBinary).
// systemd-analyze needs the binary of ExecStart to exist, so it checks a
// copy that starts the binary the tests built; the command line is checked
// by running it with --help, which fails on an unknown command or flag.
func checkUnit(t *testing.T, name, text string) []string {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze is required (Debian package systemd; .ci/run installs it)")
	}
	var problems []string
	var execStart []string
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = strings.Fields(v)
		}
	}
	want := unitBinary[name]
	if len(execStart) == 0 || execStart[0] != want {
		return append(problems, fmt.Sprintf("ExecStart must run %s", want))
	}
	built := map[string]string{installedBinary: binary, installedAgentBinary: agentBinary}[want]
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, want+" ", built+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command("systemd-analyze", args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	// verify exits 0 on a key it ignores, so any line naming the unit is a problem.
	out, err := run("verify", "--man=no", path)
	if err != nil {
		problems = append(problems, fmt.Sprintf("systemd-analyze verify: %v", err))
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, name) {
			problems = append(problems, l)
		}
	}
	out, err = run("security", "--offline=yes", "--threshold="+maxExposure, path)
	if err != nil {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		problems = append(problems, fmt.Sprintf("systemd-analyze security (threshold %s): %v: %s", maxExposure, err, lines[len(lines)-1]))
	}
	help := exec.Command(built, append(execStart[1:], "--help")...)
	if b, err := help.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		problems = append(problems, fmt.Sprintf("%s: %v: %s", strings.Join(execStart, " "), err, bytes.TrimSpace(b)))
	}
	return problems
}

// TestAgentUnitCanActOnTheNode: the shipped agent unit runs as root, keeps
// the capabilities a kind's user and group need (and CAP_KILL to stop what
// runs as them), and reaches systemd's socket, so that a kind may run
// `systemctl restart`.
func TestAgentUnitCanActOnTheNode(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(filepath.Join("..", "configs", "systemd", "muster-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			keys[k] = v
		}
	}
	if u := keys["User"]; u != "root" {
		t.Errorf("User=%s: the agent runs as root", u)
	}
	for _, c := range []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL"} {
		if !strings.Contains(keys["CapabilityBoundingSet"], c) {
			t.Errorf("CapabilityBoundingSet=%s lacks %s", keys["CapabilityBoundingSet"], c)
		}
	}
	if !strings.Contains(keys["RestrictAddressFamilies"], "AF_UNIX") {
		t.Error("systemctl needs AF_UNIX to reach systemd")
	}
	for _, k := range []string{"PrivateUsers", "ProtectSystem=full", "InaccessiblePaths"} {
		if _, ok := keys[k]; ok {
			t.Errorf("%s would keep systemctl from systemd", k)
		}
	}
}
