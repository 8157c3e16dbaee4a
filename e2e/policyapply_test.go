package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// Issue 33, scenario 2 (docs/policy-as-data.md): two replicas on
// PostgreSQL. `muster apply -f` of a policy file through one replica makes
// its windows, budget and approval rule, playbook and schedule, marked
// with the file; the other replica's cluster shows the windows from the
// store, without SIGHUP; a second apply changes nothing; with one window
// changed, the diff shows exactly that window, apply changes exactly it,
// and the other replica follows; with the approved schedule changed,
// exactly it changes and it waits for approval again. A rule of core.yaml deleted through the API is drift that the
// replica reports in `muster core status` after a SIGHUP.
func TestApplyPolicyTwiceChangesNothingThenExactlyTheChangedWindow(t *testing.T) {
	t.Parallel()
	f := newHAFleet(t, 2, 1, "approval:\n  rules:\n    - {kind: \"muster.io/debug.*\", approval: none}\n")
	env := func(i int, who string) []string {
		return []string{"MUSTER_ADDR=http://" + f.cores[i].Addr(), "MUSTER_TOKEN=" + f.secrets[who]}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(filepath.Join(dir, "nap.yaml"), []byte("name: nap\nstages:\n  - name: sleep\n    kind: muster.io/debug.sleep\n"+
		"    args: {seconds: 1}\n    target: {nodes: [node-1]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	napCron := "0 4 * * *"
	write := func(nightly string) {
		doc := "playbooks:\n  - {name: nap, file: nap.yaml}\n" +
			"schedules:\n  - {name: c1-nap, cluster: c1, playbook: nap, version: latest, cron: \"" + napCron + "\"}\n" +
			"windows:\n" +
			"  - {name: nightly, cluster: c1, cron: \"" + nightly + "\", duration: 4h, timezone: Europe/Berlin}\n" +
			"  - {name: sunday, cluster: c1, cron: \"0 10 * * 0\", duration: 2h}\n" +
			"budgets:\n  - {cluster: c1, max_unavailable: 1}\n" +
			"approval_rules:\n  - {name: c1-any, cluster: c1, approval: required}\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("0 2 * * *")
	out := muster(t, env(0, "admin"), "diff", "-f", path)
	if strings.Count(out, "\n") != 6 || !strings.Contains(out, "+ window nightly") || !strings.Contains(out, "+ budget c1") ||
		!strings.Contains(out, "+ playbook nap version 1") || !strings.Contains(out, "+ schedule c1-nap") {
		t.Fatalf("diff:\n%s", out)
	}
	out = muster(t, env(0, "admin"), "apply", "-f", path, "--reason", "change board 12")
	if !strings.Contains(out, "Applied 6 change(s) from policy.yaml") {
		t.Fatalf("apply:\n%s", out)
	}
	windows := func(i int) []string {
		cl, err := f.client(i, "alice").Cluster(ctxT(t), "c1")
		if err != nil || cl.Calendar == nil {
			return nil
		}
		var out []string
		for _, w := range cl.Calendar.Windows {
			out = append(out, w.Cron)
		}
		return out
	}
	testwait.Within(t, 10*time.Second, "the other replica's c1 has the applied windows", func() bool {
		ws := windows(1)
		return len(ws) == 2 && strings.Contains(strings.Join(ws, ","), "0 2 * * *")
	})
	if out := muster(t, env(1, "alice"), "window", "list"); !strings.Contains(out, "file:policy.yaml") || !strings.Contains(out, "admin") {
		t.Fatalf("window list on the other replica:\n%s", out)
	}
	events := func() int {
		es, err := f.client(1, "admin").Events(ctxT(t), 0, 1000, client.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es.Events {
			if strings.HasPrefix(e.Type, "policy.") {
				n++
			}
		}
		return n
	}
	before := events()
	for _, cmd := range []string{"apply", "diff"} {
		if out := muster(t, env(1, "admin"), cmd, "-f", path); !strings.Contains(out, "No changes: the store holds what policy.yaml declares.") {
			t.Fatalf("%s again:\n%s", cmd, out)
		}
	}
	if got := events(); got != before {
		t.Fatalf("a second apply made %d policy events", got-before)
	}

	write("0 3 * * *")
	out = muster(t, env(1, "admin"), "diff", "-f", path)
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "~ window nightly:") || !strings.Contains(out, `"0 2 * * *"`) ||
		!strings.Contains(out, `"0 3 * * *"`) {
		t.Fatalf("diff with one window changed:\n%s", out)
	}
	out = muster(t, env(1, "admin"), "apply", "-f", path, "--reason", "nights move an hour")
	if !strings.Contains(out, "Applied 1 change(s)") {
		t.Fatalf("apply with one window changed:\n%s", out)
	}
	if got := events(); got != before+1 {
		t.Fatalf("apply of one changed window made %d policy events, want 1", got-before)
	}
	testwait.Within(t, 10*time.Second, "replica 0 follows the changed window", func() bool {
		ws := strings.Join(windows(0), ",")
		return strings.Contains(ws, "0 3 * * *") && !strings.Contains(ws, "0 2 * * *") && strings.Contains(ws, "0 10 * * 0")
	})
	if out := muster(t, env(0, "alice"), "window", "history", "nightly"); !strings.Contains(out, "changed") {
		t.Fatalf("window history:\n%s", out)
	}

	// The schedule, approved, then changed in the file: exactly it
	// changes, and it waits for approval again.
	muster(t, env(0, "bob"), "schedule", "approve", "c1-nap")
	if out := muster(t, env(1, "alice"), "schedule", "show", "c1-nap"); !strings.Contains(out, "ACTIVE") {
		t.Fatalf("schedule show after approval:\n%s", out)
	}
	napCron = "0 5 * * *"
	write("0 3 * * *")
	out = muster(t, env(0, "admin"), "diff", "-f", path)
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "~ schedule c1-nap:") || !strings.Contains(out, "waits for approval again") {
		t.Fatalf("diff with the schedule changed:\n%s", out)
	}
	if out := muster(t, env(0, "admin"), "apply", "-f", path); !strings.Contains(out, "Applied 1 change(s)") {
		t.Fatalf("apply with the schedule changed:\n%s", out)
	}
	if out := muster(t, env(1, "alice"), "schedule", "show", "c1-nap"); !strings.Contains(out, "PENDING_APPROVE") || !strings.Contains(out, "0 5 * * *") {
		t.Fatalf("schedule show after the change:\n%s", out)
	}

	// The rule core.yaml seeded, deleted through the API: a reloaded
	// replica whose file still declares it says so, and follows the store.
	var id string
	for _, line := range strings.Split(muster(t, env(0, "alice"), "approval-rule", "list"), "\n") {
		if strings.Contains(line, "config") {
			id = strings.Fields(line)[0]
		}
	}
	if id == "" {
		t.Fatal("no approval rule from core.yaml listed")
	}
	muster(t, env(0, "admin"), "approval-rule", "delete", id, "--reason", "debug kinds need approval now")
	f.cores[1].signal(syscall.SIGHUP)
	testwait.Within(t, 10*time.Second, "core status of replica 1 tells the drift", func() bool {
		cmd := muster(t, env(1, "admin"), "core", "status")
		return strings.Contains(cmd, "Policy drift") && strings.Contains(cmd, id) && strings.Contains(cmd, "deleted by admin")
	})
}
