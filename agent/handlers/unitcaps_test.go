package handlers

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// unitCapsEnv marks the test binary run by TestExternalUserUnderTheUnitsCapabilities.
const unitCapsEnv = "MUSTER_TEST_UNIT_CAPS"

// unitCaps is the effective set muster-agent.service leaves the agent:
// CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7).
const unitCaps = "00000000000000e0"

// A kind with user works with only the capabilities that
// configs/systemd/muster-agent.service keeps (no CAP_CHOWN, no
// CAP_DAC_OVERRIDE): the tests of commands run as nobody pass again in this
// test binary started by setpriv with that bounding set and no_new_privs.
func TestExternalUserUnderTheUnitsCapabilities(t *testing.T) {
	if os.Getenv(unitCapsEnv) != "" {
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "CapEff:\t"+unitCaps+"\n") {
			t.Fatalf("not under the unit's capabilities:\n%s", status)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("dropping privileges needs root (CI runs as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) here")
	}
	run := "^(TestExternalUserUnderTheUnitsCapabilities|TestExternalRunsAsItsUser|TestExternalOutputsWrittenByItsUser|TestExternalOutputsSymlinkDoesNotLeak|TestExternalOutputsFIFODoesNotHang)$"
	cmd := exec.Command(setpriv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all,+setuid,+setgid,+kill", "--",
		os.Args[0], "-test.run", run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), unitCapsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under the unit's capabilities: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- PASS: TestExternalUserUnderTheUnitsCapabilities",
		"--- PASS: TestExternalRunsAsItsUser/user_only",
		"--- PASS: TestExternalOutputsWrittenByItsUser/user=nobody",
		"--- PASS: TestExternalOutputsSymlinkDoesNotLeak/user=nobody",
		"--- PASS: TestExternalOutputsFIFODoesNotHang/user=nobody",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
