package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/shared/live"
)

// The Clusters page shows the Freeze button to those who may freeze the
// cluster (operator, approver, admin) and a Lift button on each freeze to
// those who may lift it (approver, admin); a viewer sees neither. The
// Freeze button freezes the cluster, with the reason given.
func TestClustersPageFreezeAndLiftButtons(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cal := &schedule.Calendar{Freezes: []schedule.Freeze{{ID: "frz-1", From: now.Add(-time.Hour), To: now.Add(time.Hour), Reason: "incident"}}}
	e := setup(t, func(c *Config) { c.Calendars = live.New(schedule.Calendars{"prod": cal}) })
	const freezeForm, liftForm = `action="/ui/clusters/prod/freeze"`, `action="/ui/freezes/frz-1/lift"`
	for who, want := range map[string][2]bool{"viewer": {false, false}, "op": {true, false}, "appr": {true, true}, "admin": {true, true}} {
		status, _, body := e.browser().signIn(who).get("/ui/clusters")
		if status != http.StatusOK {
			t.Fatalf("%s: clusters: %d", who, status)
		}
		if got := [2]bool{strings.Contains(body, freezeForm), strings.Contains(body, liftForm)}; got != want {
			t.Errorf("%s sees the freeze and lift forms: %v, want %v", who, got, want)
		}
	}
	b := e.browser().signIn("op")
	status, _, body := b.post("/ui/clusters/prod/freeze", url.Values{"csrf": {b.csrf}, "for": {"2h"}, "reason": {"incident 4711"}})
	if status != http.StatusSeeOther {
		t.Fatalf("freeze: %d\n%s", status, body)
	}
	fs, err := schedule.LoadFreezes(t.Context(), e.st, now)
	if err != nil || len(fs) != 1 || fs[0].Reason != "incident 4711" || fs[0].CreatedBy != "op" || fs[0].To.Before(now.Add(119*time.Minute)) {
		t.Fatalf("stored freezes after the button: %+v, %v", fs, err)
	}
	for _, form := range []url.Values{{"for": {"2h"}}, {"for": {"soon"}, "reason": {"x"}}, {"for": {"1s"}, "reason": {"x"}}} {
		form.Set("csrf", b.csrf)
		if status, _, _ := b.post("/ui/clusters/prod/freeze", form); status != http.StatusBadRequest {
			t.Errorf("freeze %v: %d, want 400", form, status)
		}
	}
}

func FuzzDecodeFreezeForms(f *testing.F) {
	for _, s := range []string{"for=2h&reason=incident", "for=&reason=x", "for=1s&reason=x", "for=9999999h&reason=x",
		"for=2h&reason=%1b%5b31m", "for=2h&reason=" + strings.Repeat("r", 600), "reason=ok", "reason="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		if got, err := decodeFreeze(v); err == nil {
			if got.For < time.Minute || got.For > maxFreezeFor || got.Reason == "" || len(got.Reason) > maxReason ||
				hasControl(got.Reason) || !utf8.ValidString(got.Reason) {
				t.Fatalf("decodeFreeze(%q) accepted %+v", body, got)
			}
		}
		if got, err := decodeLift(v); err == nil && (got == "" || len(got) > maxReason || hasControl(got) || !utf8.ValidString(got)) {
			t.Fatalf("decodeLift(%q) accepted %q", body, got)
		}
	})
}
