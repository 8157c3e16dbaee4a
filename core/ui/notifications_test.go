package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/store"
)

func TestNotificationsPageShowsDestinationsToAdminsAlone(t *testing.T) {
	t.Parallel()
	dests := []notify.Destination{{Name: "oncall", URL: "https://hooks.example.com/in?key=TOPSECRET", Format: notify.FormatJSON,
		Events: []string{"run.*"}}}
	e := setup(t, func(c *Config) { c.Notify = func() []notify.Destination { return dests } })
	e.st.SetOutbox(notify.Route(dests))
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventRunPaused, Actor: store.ActorCore}); err != nil {
			return err
		}
		if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventRunPaused, Actor: store.ActorCore}); err != nil {
			return err
		}
		d, err := store.NextDelivery(ctx, tx, "oncall")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.LastStatus, d.LastError = store.DeliveryDead, 3, 404, "404 <script>alert(1)</script>\x1b[31m"
		return tx.UpdateDelivery(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
	admin := e.browser().signIn("admin")
	status, _, body := admin.get("/ui/notifications")
	if status != http.StatusOK {
		t.Fatalf("admin: %d\n%s", status, body)
	}
	for _, want := range []string{`href="/ui/notifications" aria-current="page"`, "oncall", "https://hooks.example.com/…",
		"1 pending", "1 dead", "&lt;script&gt;", `\x1b[31m`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"TOPSECRET", "<script>alert", "\x1b"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page shows %q", bad)
		}
	}
	viewer := e.browser().signIn("viewer")
	if status, _, _ := viewer.get("/ui/notifications"); status != http.StatusForbidden {
		t.Errorf("viewer: %d, want 403", status)
	}
	if _, _, body := viewer.get("/ui/approvals"); strings.Contains(body, "/ui/notifications") {
		t.Error("a viewer's menu links to Notifications")
	}
}

func TestEventsPageMarksEachDeliveryOfAnEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.st.SetOutbox(func(ev *store.Event) []string {
		if ev.Type == store.EventRunPaused {
			return []string{"pager<b>", "chat", "ops"}
		}
		return nil
	})
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventRunPaused, Actor: store.ActorCore, Message: "paused"}); err != nil {
			return err
		}
		if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventRunResumed, Actor: store.ActorCore, Message: "resumed"}); err != nil {
			return err
		}
		d, err := store.NextDelivery(ctx, tx, "pager<b>")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.LastError = store.DeliveryDead, 3, "404 from https://hooks.example.com/in?key=TOPSECRET"
		if err := tx.UpdateDelivery(ctx, d); err != nil {
			return err
		}
		if d, err = store.NextDelivery(ctx, tx, "chat"); err != nil {
			return err
		}
		d.State, d.Attempts = store.DeliveryDelivered, 1
		if err := tx.UpdateDelivery(ctx, d); err != nil {
			return err
		}
		if d, err = store.NextDelivery(ctx, tx, "ops"); err != nil {
			return err
		}
		d.Attempts = 2
		return tx.UpdateDelivery(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
	viewer := e.browser().signIn("viewer")
	for _, path := range []string{"/ui/events", "/ui/events?part=live"} {
		status, _, body := viewer.get(path)
		if status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, status, body)
		}
		for _, want := range []string{`class="mark mark-dead"`, "pager&lt;b&gt;: dead", `class="mark mark-delivered"`, "chat: delivered",
			`class="mark mark-pending"`, "ops: pending, 2 tries"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
		if strings.Count(body, `class="mark `) != 3 {
			t.Errorf("%s shows %d marks, want 3 (the resumed event has no delivery)", path, strings.Count(body, `class="mark `))
		}
		for _, bad := range []string{"pager<b>", "TOPSECRET", "hooks.example.com"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s shows %q", path, bad)
			}
		}
	}
}
