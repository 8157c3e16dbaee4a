package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// coreEvent waits for an event of typ with a sequence number above since
// and returns it.
func (f *fleet) coreEvent(typ string, since int64) wire.Event {
	f.t.Helper()
	var got wire.Event
	testwait.Within(f.t, 20*time.Second, typ, func() bool {
		list, err := f.admin.Events(ctxT(f.t), since, 100, client.EventFilter{Types: []string{typ}})
		if err != nil || len(list.Events) == 0 {
			return false
		}
		got = list.Events[0]
		return true
	})
	return got
}

// TestCoreReloadsItsConfigOnSIGHUP: a real core process takes new approval
// rules on SIGHUP and says so in an event; an invalid configuration on the
// next SIGHUP changes nothing, with an event and a log line; a notification
// destination added by a SIGHUP receives the next event, signed, and an
// invalid notify: section keeps it.
func TestCoreReloadsItsConfigOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: dir, coreExtra: "approval:\n  default: required\n  ttl: 1h\n"})
	path := filepath.Join(dir, "core", "core.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if a := f.create("node-1", "muster.io/debug.ping", `{}`); a.State != action.PendingApprove {
		t.Fatalf("before the reload: %s", a.State)
	}
	last, err := f.admin.Events(ctxT(t), -1, 1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	since := last.Next

	// Approval no longer required, and ping disruptive: one SIGHUP.
	if cl, err := f.admin.Cluster(ctxT(t), "e2e"); err != nil || cl.Budget != nil {
		t.Fatalf("a budget before the reload: %+v %v", cl, err)
	}
	next := strings.Replace(string(orig), "default: required", "default: none", 1) +
		"kinds:\n  - {kind: muster.io/debug.ping, disruptive: true}\n"
	next = strings.Replace(next, "orchestrate:", "    budget: {max_unavailable: \"1\"}\norchestrate:", 1)
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	ev := f.coreEvent("core.config_reloaded", since)
	if !strings.Contains(ev.Message, "approval, kinds, budgets changed") || ev.Actor != "core" {
		t.Fatalf("reload event %+v", ev)
	}
	if cl, err := f.admin.Cluster(ctxT(t), "e2e"); err != nil || cl.Budget == nil || cl.Budget.Max != 1 {
		t.Fatalf("the reloaded budget is not in use: %+v %v", cl, err)
	}
	if a := f.create("node-1", "muster.io/debug.ping", `{}`); a.State == action.PendingApprove {
		t.Fatal("the new approval rules were not applied")
	}
	since = ev.Seq

	// An invalid configuration: the running one stays.
	bad := strings.Replace(string(orig), "default: required", "default: sometimes", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	ev = f.coreEvent("core.config_rejected", since)
	if !strings.Contains(ev.Message, "approval.default") || !strings.Contains(ev.Message, "the one in use stays") {
		t.Fatalf("reject event %+v", ev)
	}
	testwait.Within(t, 10*time.Second, "the log line", func() bool {
		return strings.Contains(f.core.logs(), "configuration not reloaded, the one in use stays")
	})
	if a := f.create("node-1", "muster.io/debug.ping", `{}`); a.State == action.PendingApprove {
		t.Fatal("an invalid configuration changed the approval rules")
	}
	since = ev.Seq

	// A notification destination added: it receives the next event, signed
	// with its secret.
	hook := newHookReceiver(t, "reloaded-secret", nil)
	withHook := next + notifyYAML(t, t.TempDir(), map[string]*hookReceiver{"oncall": hook}, "['action.created']")
	if err := os.WriteFile(path, []byte(withHook), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	ev = f.coreEvent("core.config_reloaded", since)
	if !strings.Contains(ev.Message, "notify changed") || !strings.Contains(ev.Message, "added oncall") ||
		strings.Contains(ev.Message, "restart") {
		t.Fatalf("reload event %+v, want notify changed, oncall added, no restart", ev)
	}
	a := f.create("node-1", "muster.io/debug.ping", `{}`)
	var got []hookDelivery
	testwait.Within(t, 20*time.Second, "the added destination has the action.created", func() bool {
		got = hook.deliveries()
		return len(got) > 0
	})
	if got[0].Type != "action.created" || got[0].Action != a.ID || got[0].id != "msg_"+strconv.FormatInt(got[0].Seq, 10)+"_oncall" {
		t.Fatalf("delivery %+v, want the action.created of %s", got[0], a.ID)
	}
	if n := hook.badSig.Load(); n != 0 {
		t.Fatalf("%d deliveries failed the signature check", n)
	}
	since = ev.Seq

	// An invalid notify: section: the destination in use stays.
	if err := os.WriteFile(path, []byte(strings.Replace(withHook, "format: json", "format: xml", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	ev = f.coreEvent("core.config_rejected", since)
	if !strings.Contains(ev.Message, "notify[0].format") {
		t.Fatalf("reject event %+v, want notify[0].format named", ev)
	}
	a = f.create("node-1", "muster.io/debug.ping", `{}`)
	testwait.Within(t, 20*time.Second, "the destination in use has the next action.created", func() bool {
		got = hook.deliveries()
		return len(got) > 1
	})
	if got[1].Action != a.ID || hook.badSig.Load() != 0 {
		t.Fatalf("delivery %+v after the rejected reload, want the action.created of %s, signed", got[1], a.ID)
	}
	if err := f.admin.Health(ctxT(t)); err != nil {
		t.Fatalf("the core is not healthy after the reloads: %v", err)
	}
}
