package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// reloadCore rewrites the core's configuration with edit and sends it a
// SIGHUP, then waits for the event saying the approval policy changed.
func (f *fleet) reloadCore(path string, edit func(string) string) {
	f.t.Helper()
	last, err := f.admin.Events(ctxT(f.t), -1, 1, client.EventFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(b))), 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	if ev := f.coreEvent("core.config_reloaded", last.Next); !strings.Contains(ev.Message, "approval") {
		f.t.Fatalf("reload event %+v, want approval changed", ev)
	}
}

// Issue 30, item 5, against a real core: a SIGHUP that turns self_approval
// off binds at once (whoever applied a playbook may no longer approve its
// runs), and one that shortens approval.ttl expires, at the next sweep, an
// action that waited longer than the new TTL.
func TestAPolicyReloadBindsFourEyesAndExpiryAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: dir,
		coreExtra: "approval:\n  default: required\n  self_approval: true\n  ttl: 24h\n"})
	path := filepath.Join(dir, "core", "core.yaml")
	applyPlaybook(t, f.admin, schedulePlaybook("pb", "muster.io/debug.ping", "{}", "v1"))
	start := func() *wire.Run {
		r, err := f.alice.StartPlaybook(ctxT(t), "pb", &wire.PlanRequest{ClusterID: "e2e", Version: 1})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		return r
	}
	before := start()
	if _, err := f.admin.ApproveRun(ctxT(t), before.ID, before.Digest); err != nil {
		t.Fatalf("with self_approval, the applier's approval: %v", err)
	}
	waiting := f.create("node-1", "muster.io/debug.ping", `{}`)
	if waiting.State != action.PendingApprove {
		t.Fatalf("action %s, want PENDING_APPROVE", waiting.State)
	}

	f.reloadCore(path, func(s string) string { return strings.Replace(s, "self_approval: true", "self_approval: false", 1) })
	after := start()
	if _, err := f.admin.ApproveRun(ctxT(t), after.ID, after.Digest); err == nil || !strings.Contains(err.Error(), "may not approve") {
		t.Fatalf("after the reload, the applier's approval: %v, want a refusal", err)
	}
	if _, err := f.bob.ApproveRun(ctxT(t), after.ID, after.Digest); err != nil {
		t.Fatalf("another approver: %v", err)
	}

	// The action has waited longer than the new TTL: the next sweep (every
	// interval, 1 s) expires it.
	testwait.Within(t, 10*time.Second, "the action older than 3 s", func() bool {
		a, err := f.admin.Action(ctxT(t), waiting.ID)
		return err == nil && time.Since(a.CreatedTS) > 3*time.Second
	})
	f.reloadCore(path, func(s string) string { return strings.Replace(s, "ttl: 24h", "ttl: 3s", 1) })
	testwait.Within(t, 10*time.Second, "the action expired under the reloaded TTL", func() bool {
		a, err := f.admin.Action(ctxT(t), waiting.ID)
		return err == nil && a.State == action.Cancelled && a.StateReason == "expired"
	})
}
