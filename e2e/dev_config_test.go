package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// `muster dev` writes dev.yaml on first start and names it in its banner;
// SIGHUP reads it again: a freeze written there is in force for cluster dev,
// and an invalid file is refused with the freeze kept. The process lives on.
func TestDevReloadsDevYAMLOnHangup(t *testing.T) {
	t.Parallel()
	d := startDev(t, "--agents", "1")
	file := filepath.Join(d.dir, "dev.yaml")
	example, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("muster dev wrote no dev.yaml: %v", err)
	}
	for _, want := range []string{"windows:", "freezes:", "budget:", "notify:", "127.0.0.1"} {
		if !strings.Contains(string(example), want) {
			t.Fatalf("dev.yaml has no example of %s:\n%s", want, example)
		}
	}
	hint := "edit " + file + "\nand run kill -HUP " + strconv.Itoa(d.cmd.Process.Pid)
	if !strings.Contains(d.banner, hint) {
		t.Fatalf("the banner does not say %q:\n%s", hint, d.banner)
	}
	ctx := context.Background()
	frozen := func() string {
		cl, err := d.alice.Cluster(ctx, "dev")
		if err != nil || cl.Calendar == nil || cl.Calendar.Frozen == nil {
			return ""
		}
		return cl.Calendar.Frozen.Reason
	}
	if r := frozen(); r != "" {
		t.Fatalf("cluster dev is frozen (%q) before any freeze was written", r)
	}

	from, to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339)
	writeDevYAML(t, file, `clusters:
  - id: dev
    budget: {max_unavailable: "1"}
    freezes:
      - {from: "`+from+`", to: "`+to+`", reason: trying a freeze}
`)
	hangup(t, d)
	testwait.For(t, "the freeze from dev.yaml in force", func() bool { return frozen() == "trying a freeze" })

	// A freeze ending before it starts: refused, the one in use stays.
	writeDevYAML(t, file, `clusters:
  - id: dev
    freezes:
      - {from: "`+to+`", to: "`+from+`", reason: backwards}
`)
	hangup(t, d)
	testwait.For(t, "a core.config_rejected event naming dev.yaml", func() bool {
		l, err := d.alice.Events(ctx, 0, 100, client.EventFilter{Types: []string{"core.config_rejected"}})
		return err == nil && len(l.Events) > 0 && strings.Contains(l.Events[len(l.Events)-1].Message, "dev.yaml")
	})
	if r := frozen(); r != "trying a freeze" {
		t.Fatalf("after a refused dev.yaml the freeze in force is %q, want the old one kept", r)
	}
	// A key muster dev does not read here is refused too.
	writeDevYAML(t, file, "api:\n  addr: 127.0.0.1:1\n")
	hangup(t, d)
	testwait.For(t, "a second core.config_rejected event", func() bool {
		l, err := d.alice.Events(ctx, 0, 100, client.EventFilter{Types: []string{"core.config_rejected"}})
		return err == nil && len(l.Events) > 1
	})
	if r := frozen(); r != "trying a freeze" {
		t.Fatalf("after a refused dev.yaml the freeze in force is %q, want the old one kept", r)
	}
}

func writeDevYAML(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hangup sends SIGHUP to muster dev.
func hangup(t *testing.T, d *devCluster) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP: %v", err)
	}
}
