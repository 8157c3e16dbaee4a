package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// systemdRunning is the directory the scripts look for to know systemd
// runs; the tests point it at a directory of their own.
const systemdRunning = "/run/systemd/system"

// runScript runs the script at path with args, as dpkg or rpm would, with
// systemctl, chown and chmod fakes on PATH that record their calls (and
// touch nothing), and systemd running or not. It returns the calls, in
// order, and what the script printed.
func runScript(t *testing.T, path string, systemd bool, args ...string) (calls []string, out string) {
	t.Helper()
	dir := t.TempDir()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), systemdRunning) {
		t.Fatalf("%s does not look for %s", path, systemdRunning)
	}
	running := filepath.Join(dir, "run-systemd-system")
	if systemd {
		if err := os.Mkdir(running, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(string(text), systemdRunning, running)), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	for _, fake := range []string{"systemctl", "chown", "chmod"} {
		if err := os.WriteFile(filepath.Join(bin, fake), []byte("#!/bin/sh\necho \"$(basename \"$0\") $*\" >>\"$CALLS\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "CALLS=" + log}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh %s %q: %v\n%s", filepath.Base(path), args, err, b)
	}
	recorded, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(recorded)), "\n") {
		if strings.HasPrefix(line, "systemctl ") {
			calls = append(calls, line)
		}
	}
	return calls, string(b)
}

// TestPostinstallRestartsOnUpgradeAndNotesOnFirstInstall runs each
// package's postinst as dpkg and rpm do: on an upgrade it try-restarts the
// package's unit (which never starts a stopped unit) and prints nothing;
// on a first install it starts nothing and prints what to edit; without
// systemd running it calls no systemctl.
func TestPostinstallRestartsOnUpgradeAndNotesOnFirstInstall(t *testing.T) {
	t.Parallel()
	_, bin, agentBin := standIns(t)
	for _, p := range packages(bin, agentBin) {
		script := packageInfo("..", p, "amd64", "v1.2.3", "units").Scripts.PostInstall
		reload := "systemctl daemon-reload"
		restart := "systemctl try-restart " + p.unit
		for name, tc := range map[string]struct {
			args    []string
			systemd bool
			calls   []string
			note    bool
		}{
			"dpkg first install":           {[]string{"configure", ""}, true, []string{reload}, true},
			"dpkg first install, $2 unset": {[]string{"configure"}, true, []string{reload}, true},
			"dpkg upgrade":                 {[]string{"configure", "1.2.2"}, true, []string{reload, restart}, false},
			"dpkg abort-upgrade":           {[]string{"abort-upgrade", "1.2.4"}, true, []string{reload}, false},
			"rpm install":                  {[]string{"1"}, true, []string{reload}, true},
			"rpm upgrade":                  {[]string{"2"}, true, []string{reload, restart}, false},
			"dpkg upgrade, no systemd":     {[]string{"configure", "1.2.2"}, false, nil, false},
			"rpm install, no systemd":      {[]string{"1"}, false, nil, true},
		} {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				calls, out := runScript(t, script, tc.systemd, tc.args...)
				if !slices.Equal(calls, tc.calls) {
					t.Errorf("systemctl calls %q, want %q", calls, tc.calls)
				}
				if noted := strings.Contains(out, "/etc/muster/"+p.config); noted != tc.note {
					t.Errorf("note printed: %v, want %v:\n%s", noted, tc.note, out)
				}
			})
		}
	}
}
