package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
)

// People granted one cluster's roles only (staging-*): the output part of
// another cluster's action is a 404 saying nothing of it, and the New run
// form neither plans nor starts on a cluster they may not create on; no
// run is made.
func TestScopedPeopleNeitherFollowNorLaunchOnAnotherCluster(t *testing.T) {
	t.Parallel()
	s := setupScoped(t)
	var running string
	for _, id := range s.ids["prod"] {
		if action.ValidID(id) && id != s.prodAction && id != s.prodRun {
			running = id
		}
	}
	if running == "" {
		t.Fatal("setupScoped made no running action on prod")
	}
	for _, who := range []string{"stg", "stgappr"} {
		b := s.browser().signIn(who)
		for _, id := range []string{s.prodAction, running} {
			status, _, body := b.get("/ui/actions/" + id + "?part=output")
			if status != http.StatusNotFound || strings.Contains(body, `"state"`) || strings.Contains(body, "prod") {
				t.Errorf("%s reads prod's action %s output: %d %q, want a 404 naming nothing", who, id, status, body)
			}
		}
		if status, _, body := b.get("/ui/actions/" + s.stgAction + "?part=output"); status != http.StatusOK || !strings.Contains(body, `"state"`) {
			t.Errorf("%s reads staging's action output: %d %q", who, status, body)
		}
		for _, c := range []string{"prod", "staging-1"} {
			if who == "stgappr" && c == "staging-1" {
				continue // theirs to launch on
			}
			for _, do := range []string{"plan", "start"} {
				form := url.Values{"csrf": {b.csrf}, "cluster": {c}, "do": {do}, "document": {adhocDoc},
					"digest": {strings.Repeat("0", 64)}}
				status, _, body := b.post("/ui/runs/new", form)
				if status < 400 || status >= 500 || strings.Contains(body, "plan-digest") {
					t.Errorf("%s %ss a run on %s: %d, want refused\n%s", who, do, c, status, body)
				}
			}
		}
	}
	if n := s.runCount(); n != 2 {
		t.Fatalf("%d runs, want the 2 setupScoped made", n)
	}
}
