package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// TestActionOutputPartIsTextToFollow: ?part=output of an action's page is
// its output as JSON text (control characters made visible, so a page
// setting it as text shows nothing but text), its state and whether it is
// final; a run's node cell offers it, to be followed, for the node's
// current child.
func TestActionOutputPartIsTextToFollow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{}`)
	e.edit(a.ID, func(r *store.Record) {
		r.Output = "<img src=x onerror=alert(1)>\x1b[2J done"
		r.State = action.Running
	})
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/actions/" + a.ID + "?part=output")
	var got outputPart
	if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("part=output: %d %q", status, body)
	}
	if got.State != "RUNNING" || got.Final || got.Output != `<img src=x onerror=alert(1)>\x1b[2J done` {
		t.Fatalf("part=output: %+v", got)
	}
	e.edit(a.ID, func(r *store.Record) { r.State = action.Done })
	if _, _, body := b.get("/ui/actions/" + a.ID + "?part=output"); !strings.Contains(body, `"final":true`) {
		t.Fatalf("a DONE action's output part: %s", body)
	}
	if status, _, _ := b.get("/ui/actions/" + action.NewID() + "?part=output"); status != http.StatusNotFound {
		t.Fatalf("an unknown action's output: %d, want 404", status)
	}

	r := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonStageFailed, "upgrade", 1, "0"), "db-1", "db-2")
	up := child(r, "db-1", "upgrade", 1, action.Running, `{}`, "")
	e.storeRun(r, up)
	_, _, page := b.get("/ui/runs/" + r.ID)
	if !strings.Contains(page, `<details class="node-output" id="out-`+up.ID+`" data-keep-open>`) ||
		!strings.Contains(page, `data-follow-output="`+up.ID+`"`) {
		t.Fatalf("the run page's db-1 cell does not offer its current step's output")
	}
}

// TestRunningActionPageFollowsItsOutput: a RUNNING action's page marks its
// output to be followed (data-follow-output); a finished one's is plain.
func TestRunningActionPageFollowsItsOutput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{}`)
	e.edit(a.ID, func(r *store.Record) { r.State, r.Output = action.Running, "line 1\n" })
	b := e.browser().signIn("viewer")
	if _, _, body := b.get("/ui/actions/" + a.ID); !strings.Contains(body, `id="action-output" data-follow-output="`+a.ID+`"`) {
		t.Fatal("a RUNNING action's output is not followed")
	}
	e.edit(a.ID, func(r *store.Record) { r.State = action.Done })
	if _, _, body := b.get("/ui/actions/" + a.ID); strings.Contains(body, `data-follow-output`) || !strings.Contains(body, "line 1") {
		t.Fatal("a DONE action's output is followed, or not shown")
	}
}
