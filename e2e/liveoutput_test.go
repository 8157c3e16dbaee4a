package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// TestLiveOutputOfARunningAction: a RUNNING action's output reaches the
// core while it runs (the agent commits it as it grows, the core pulls it
// in a sync of the node), and `muster action logs -f` prints it as it comes
// and ends with the action. Then the times of a list follow TZ.
func TestLiveOutputOfARunningAction(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	gate := filepath.Join(base, "go-on")
	script := filepath.Join(base, "talk.sh")
	body := fmt.Sprintf("#!/bin/sh\necho 'step 1: draining'\nwhile [ ! -e %q ]; do sleep 0.05; done\necho 'step 2: done'\n", gate)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: base,
		actionsYAML: fmt.Sprintf("actions:\n  external:\n    - kind: example.com/talk\n      run: [%q]\n", script)})
	a := f.create("node-1", "example.com/talk", `{}`)
	f.approve(a.ID)
	testwait.Within(t, 20*time.Second, "the first line at the core while RUNNING", func() bool {
		got, err := f.admin.Action(ctxT(t), a.ID)
		return err == nil && got.State == action.Running && strings.Contains(got.Output, "step 1: draining")
	})

	cmd := exec.Command(binary, "action", "logs", "-f", a.ID[:8])
	cmd.Env = append(os.Environ(), "MUSTER_ADDR=http://"+f.core.Addr(), "MUSTER_TOKEN="+f.secrets["alice"])
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("muster action logs -f printed nothing more")
			return ""
		}
	}
	if l := next(); l != "step 1: draining" {
		t.Fatalf("first line %q", l)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "step 2: done" {
		t.Fatalf("second line %q", l)
	}
	for range lines { // the reads end before Wait
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("logs -f of a DONE action: %v", err)
	}

	// Times print in the zone TZ names, with the zone; --utc prints UTC.
	for _, c := range []struct {
		args []string
		zone string
	}{{[]string{"action", "list"}, "JST"}, {[]string{"action", "list", "--utc"}, "UTC"}} {
		list := exec.Command(binary, c.args...)
		list.Env = append(os.Environ(), "TZ=Asia/Tokyo", "MUSTER_ADDR=http://"+f.core.Addr(), "MUSTER_TOKEN="+f.secrets["alice"])
		b, err := list.Output()
		if err != nil || !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `+c.zone).Match(b) {
			t.Fatalf("TZ=Asia/Tokyo muster %s: %v\n%s", strings.Join(c.args, " "), err, b)
		}
	}
}
