package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// setupNotifyCLI is a real core API with one destination "hook" whose
// receiver answers status.
func setupNotifyCLI(t *testing.T, status *atomic.Int32) *cliEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(hook.Close)
	dests := []notify.Destination{{Name: "hook", URL: hook.URL + "/x?key=TOPSECRET", Format: notify.FormatSlack}}
	st.SetOutbox(notify.Route(dests))
	w, err := notify.New(notify.Config{Destinations: dests, AllowLoopback: true}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Policy: live.New(approval.DefaultPolicy()), Notify: w}, st, nil, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	e := &cliEnv{t: t, st: st, url: ts.URL, secrets: map[string]string{}}
	for name, role := range map[string]string{"op": "operator", "admin": "admin"} {
		s, err := auth.CreateToken(ctx, st, name, []string{role}, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[name] = s
	}
	return e
}

func TestCLINotify(t *testing.T) {
	t.Parallel()
	var status atomic.Int32
	status.Store(204)
	e := setupNotifyCLI(t, &status)
	out, msg, code := e.run("admin", "notify", "test", "hook")
	if code != 0 || !strings.Contains(out, "hook answered 204") {
		t.Fatalf("notify test: %q %q %d", out, msg, code)
	}
	status.Store(500)
	if _, msg, code := e.run("admin", "notify", "test", "hook"); code == 0 || !strings.Contains(msg, "status 500") {
		t.Errorf("failing notify test: %q %d, want a failure naming 500", msg, code)
	}
	if _, msg, code := e.run("op", "notify", "list"); code == 0 || !strings.Contains(msg, "403") {
		t.Errorf("notify list as operator: %q %d, want 403", msg, code)
	}
	// A dead delivery, listed and redelivered.
	var id int64
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		ctx := context.Background()
		if err := tx.AppendEvent(ctx, &store.Event{Type: "node.down", Actor: "core", Message: "\x1b[31mred"}); err != nil {
			return err
		}
		d, err := store.NextDelivery(ctx, tx, "hook")
		if err != nil {
			return err
		}
		id = d.ID
		d.State, d.Attempts, d.LastStatus, d.LastError = store.DeliveryDead, 3, 404, "404 \x1b[31mNot Found"
		return tx.UpdateDelivery(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
	out, msg, code = e.run("admin", "notify", "list")
	if code != 0 || !strings.Contains(out, "hook") || strings.Contains(out, "TOPSECRET") || strings.Contains(out, "\x1b") ||
		!strings.Contains(out, `404 \x1b[31mNot Found`) {
		t.Errorf("notify list: %q %q %d", out, msg, code)
	}
	out, _, code = e.run("admin", "notify", "deliveries", "hook", "--state", "dead", "-o", "json")
	if l := decode[wire.NotifyDeliveries](t, out); code != 0 || len(l.Deliveries) != 1 || l.Deliveries[0].ID != id {
		t.Errorf("notify deliveries --state dead: %+v", l)
	}
	if _, msg, code := e.run("admin", "notify", "deliveries", "hook", "--state", "lost"); code == 0 || !strings.Contains(msg, "400") {
		t.Errorf("--state lost: %q %d, want 400", msg, code)
	}
	out, msg, code = e.run("admin", "notify", "redeliver", strconv.FormatInt(id, 10))
	if code != 0 || !strings.Contains(out, "pending again") {
		t.Errorf("redeliver: %q %q %d", out, msg, code)
	}
	if _, msg, code := e.run("admin", "notify", "redeliver", "x"); code != 2 {
		t.Errorf("redeliver x: %q %d, want a usage error", msg, code)
	}
}
