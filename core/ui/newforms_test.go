package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// schemaKind is a kind whose args_schema needs an integer "seconds".
const schemaKind = "muster.io/debug.sleep"

// withSchema makes db-1 advertise schemaKind with an args_schema, and a
// kind named with markup.
func (e *env) withSchema() {
	e.t.Helper()
	now := time.Now().UTC()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-1", Addr: "127.0.0.1:1", Source: store.SourceStatic,
			Status: store.NodeUp, UpdatedTS: now, LastContact: &now, Kinds: []string{schemaKind, "x.io/<b>bold</b>"},
			ArgsSchemas: map[string]json.RawMessage{schemaKind: json.RawMessage(
				`{"type":"object","properties":{"seconds":{"type":"integer","description":"<script>x</script>"}},"required":["seconds"]}`)}})
	})
}

func (e *env) actionCount() int {
	e.t.Helper()
	n := 0
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		recs, _, err := store.ActionPage(context.Background(), rd, store.ListQuery{Limit: 500})
		n = len(recs)
		return err
	})
	return n
}

// TestNewActionFormTakesArgsUpToMaxArgs: args of up to action.MaxArgs
// bytes of JSON, three times as long once URL-encoded, reach the form's
// checks: accepted, or above MaxArgs refused with the field's own message,
// not as an unreadable form.
func TestNewActionFormTakesArgsUpToMaxArgs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withSchema()
	b := e.browser().signIn("op")
	b.get("/ui/actions/new")
	args := func(n int) string {
		return `{"pad":[` + strings.Repeat("{},", n) + `{}],"seconds":1}`
	}
	form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "node": {"db-1"}, "kind": {schemaKind}, "args": {args(21000)}}
	if n := len(form.Get("args")); n < 60<<10 || n > action.MaxArgs {
		t.Fatalf("args of %d bytes, want about 60 KiB", n)
	}
	status, loc, body := b.post("/ui/actions/new", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/actions/") {
		t.Fatalf("args of %d bytes (%d encoded): %d to %q, want the action created\n%s", len(form.Get("args")),
			len(form.Encode()), status, loc, body)
	}
	before := e.actionCount()
	form.Set("args", args(23000))
	status, _, body = b.post("/ui/actions/new", form)
	if status != http.StatusBadRequest || !strings.Contains(body, `id="na-args-error"`) ||
		!strings.Contains(body, "longer than "+strconv.Itoa(action.MaxArgs)) {
		t.Fatalf("args of %d bytes: %d, want a 400 saying so at the args field\n%s", len(form.Get("args")), status, body)
	}
	if e.actionCount() != before {
		t.Fatal("args above MaxArgs made an action")
	}
}

// TestNewActionFormCreatesThroughTheOperations: the form lists the kinds the
// cluster's nodes advertise (escaped); args that break the kind's
// args_schema, a bad kind or a past not-before are shown next to their
// field and make nothing; a good form makes the action the API would, with
// its action.created event, and lands on its page.
func TestNewActionFormCreatesThroughTheOperations(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withSchema()
	b := e.browser().signIn("op")
	status, _, body := b.get("/ui/actions")
	if status != http.StatusOK || !strings.Contains(body, `href="/ui/actions/new"`) {
		t.Fatalf("the Actions page offers no New action link to an operator: %d", status)
	}
	status, _, body = b.get("/ui/actions/new")
	if status != http.StatusOK || !strings.Contains(body, `<option value="muster.io/debug.sleep"`) ||
		!strings.Contains(body, `(1 node)`) {
		t.Fatalf("the form lists no advertised kind: %d\n%s", status, body)
	}
	if strings.Contains(body, "<b>bold</b>") || strings.Contains(body, "<script>x</script>") {
		t.Fatal("a kind or a schema from an agent is shown unescaped")
	}
	base := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "node": {"db-1"}, "kind": {schemaKind}}
	for name, tc := range map[string]struct {
		set   map[string]string
		field string
	}{
		"args against the schema": {map[string]string{"args": `{"seconds":"soon"}`}, "na-args-error"},
		"args not an object":      {map[string]string{"args": `[1]`}, "na-args-error"},
		"a kind not domain/name":  {map[string]string{"kind": "sleep", "args": `{"seconds":1}`}, "na-kind-error"},
		"a past not-before":       {map[string]string{"args": `{"seconds":1}`, "not_before": "2001-01-01T00:00"}, "na-not-before-error"},
		"an unknown node":         {map[string]string{"args": `{"seconds":1}`, "node": "db-404"}, "na-node-error"},
		"a bad timeout":           {map[string]string{"args": `{"seconds":1}`, "timeout": "-3"}, "na-timeout-error"},
	} {
		form := url.Values{}
		for k, v := range base {
			form[k] = v
		}
		for k, v := range tc.set {
			form.Set(k, v)
		}
		before := e.actionCount()
		status, _, body := b.post("/ui/actions/new", form)
		if status < 400 || status >= 500 || !strings.Contains(body, `id="`+tc.field+`"`) {
			t.Errorf("%s: %d, want a 4xx with the error at %s\n%s", name, status, tc.field, body)
		}
		if e.actionCount() != before {
			t.Errorf("%s: a refused form made an action", name)
		}
	}
	form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "node": {"db-1"}, "kind": {schemaKind}, "args": {`{"seconds": 2}`}}
	status, loc, _ := b.post("/ui/actions/new", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/actions/") {
		t.Fatalf("create: %d to %q", status, loc)
	}
	id := strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/ui/actions/")
	var rec *store.Record
	var evs []store.Event
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		rec, err = rd.Action(context.Background(), id)
		return err
	})
	if rec == nil || rec.Requester != "op" || rec.State != action.PendingApprove || string(rec.Args) != `{"seconds":2}` {
		t.Fatalf("created %+v, want op's action waiting for approval with the canonical args", rec)
	}
	if _, err := store.EachEvent(context.Background(), e.st, 0, 500, func(ev *store.Event) error {
		if ev.ActionID == id {
			evs = append(evs, *ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Type != store.EventActionCreated || evs[0].ClientAddr == "" {
		t.Fatalf("events of the new action: %+v, want action.created with the client's address", evs)
	}
	status, _, body = b.get(loc)
	if status != http.StatusOK || !strings.Contains(body, "Created action "+id) {
		t.Fatalf("the action's page after create: %d, no flash", status)
	}
	// A viewer is refused the form and the create.
	v := e.browser().signIn("viewer")
	if status, _, _ := v.get("/ui/actions/new"); status != http.StatusForbidden {
		t.Fatalf("a viewer's form: %d, want 403", status)
	}
	if _, _, body := v.get("/ui/actions"); strings.Contains(body, `href="/ui/actions/new"`) {
		t.Fatal("a viewer is offered New action")
	}
}

// TestCancelAndRetryFromTheActionPage: Cancel is offered on an unfinished
// action to who may cancel, Retry on a finished one to who may retry, each
// with its reason recorded; an approver sees neither.
func TestCancelAndRetryFromTheActionPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("someone", `{"seconds":1}`)
	b := e.browser().signIn("op")
	_, _, body := b.get("/ui/actions/" + a.ID)
	if !strings.Contains(body, `id="action-cancel"`) || strings.Contains(body, `id="action-retry"`) {
		t.Fatal("an unfinished action's page: want Cancel, not Retry")
	}
	ap := e.browser().signIn("appr")
	if _, _, body := ap.get("/ui/actions/" + a.ID); strings.Contains(body, `id="action-cancel"`) {
		t.Fatal("an approver is offered Cancel")
	}
	if status, _, _ := b.post("/ui/actions/"+a.ID+"/cancel", url.Values{"csrf": {b.csrf}, "reason": {"bad\x1b[2J"}}); status != http.StatusBadRequest {
		t.Fatalf("a reason with control characters: %d, want 400", status)
	}
	status, loc, _ := b.post("/ui/actions/"+a.ID+"/cancel", url.Values{"csrf": {b.csrf}, "reason": {"<i>wrong</i> node"}})
	if status != http.StatusSeeOther || !strings.Contains(loc, "done=cancelled") {
		t.Fatalf("cancel: %d to %q", status, loc)
	}
	_, _, body = b.get("/ui/actions/" + a.ID)
	if !strings.Contains(body, "&lt;i&gt;wrong&lt;/i&gt; node") || strings.Contains(body, "<i>wrong</i>") {
		t.Fatal("the cancel's reason is not in the history, escaped")
	}
	if strings.Contains(body, `id="action-cancel"`) || !strings.Contains(body, `id="action-retry"`) {
		t.Fatal("a cancelled action's page: want Retry, not Cancel")
	}
	status, loc, _ = b.post("/ui/actions/"+a.ID+"/retry", url.Values{"csrf": {b.csrf}, "reason": {"right node now"}})
	if status != http.StatusSeeOther || !strings.Contains(loc, "done=retried") || strings.Contains(loc, a.ID) {
		t.Fatalf("retry: %d to %q, want the new action's page", status, loc)
	}
	_, _, body = b.get(loc)
	if !strings.Contains(body, "right node now") || !strings.Contains(body, a.ID[:8]) {
		t.Fatal("the retry's page lacks its reason or the action it retries")
	}
	if status, _, _ := b.post("/ui/actions/"+a.ID+"/cancel", url.Values{"csrf": {b.csrf}}); status != http.StatusConflict {
		t.Fatalf("cancel of a cancelled action: %d, want 409", status)
	}
}

// TestNewScheduleFormPreviewsAndCreates: the preview lists the next five
// occurrences in the form's time zone and stores nothing; a bad cron or
// zone is shown next to its field; a good form makes the schedule waiting
// for approval, as `muster schedule create` does.
func TestNewScheduleFormPreviewsAndCreates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.applyPlaybook(schedulePlaybookDoc, "someone")
	b := e.browser().signIn("op")
	if _, _, body := b.get("/ui/schedules"); !strings.Contains(body, `href="/ui/schedules/-/new"`) {
		t.Fatal("the Schedules page offers no New schedule link to an operator")
	}
	if status, _, body := b.get("/ui/schedules/-/new"); status != http.StatusOK || !strings.Contains(body, `<option value="nightly"`) {
		t.Fatalf("the form: %d, no playbook to choose", status)
	}
	form := url.Values{"csrf": {b.csrf}, "name": {"nightly-patch"}, "cluster": {"prod"}, "playbook": {"nightly"},
		"cron": {"30 2 * * *"}, "timezone": {"Europe/Berlin"}, "concurrency": {"forbid"}, "params": {"note=<b>hi</b>"}, "do": {"preview"}}
	status, _, body := b.post("/ui/schedules/-/new", form)
	if status != http.StatusOK || strings.Count(body, "02:30 CE") != 5 || !strings.Contains(body, "Next 5 occurrences in Europe/Berlin") {
		t.Fatalf("preview: %d, want five occurrences at 02:30 Berlin time\n%s", status, body)
	}
	if strings.Contains(body, "<b>hi</b>") {
		t.Fatal("the params are shown unescaped")
	}
	for name, tc := range map[string]struct{ field, value, id string }{
		"a cron that never fires": {"cron", "0 0 30 2 *", "ns-cron-error"},
		"an unknown zone":         {"timezone", "Mars/Olympus", "ns-timezone-error"},
		"a bad param line":        {"params", "just words", "ns-params-error"},
		"an unknown playbook":     {"playbook", "nope", "ns-playbook-error"},
		"a bad concurrency":       {"concurrency", "sometimes", "ns-concurrency-error"},
	} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set(tc.field, tc.value)
		f.Set("do", "create")
		status, _, body := b.post("/ui/schedules/-/new", f)
		if status < 400 || status >= 500 || !strings.Contains(body, `id="`+tc.id+`"`) {
			t.Errorf("%s: %d, want a 4xx with the error at %s\n%s", name, status, tc.id, body)
		}
	}
	if n := len(e.scheduleNames()); n != 0 {
		t.Fatalf("previews and refused forms stored %d schedules", n)
	}
	form.Set("do", "create")
	status, loc, _ := b.post("/ui/schedules/-/new", form)
	if status != http.StatusSeeOther || loc != "/ui/schedules/nightly-patch?done=created" {
		t.Fatalf("create: %d to %q", status, loc)
	}
	_, _, body = b.get(loc)
	if !strings.Contains(body, "Created schedule nightly-patch") || !strings.Contains(body, "PENDING") {
		t.Fatal("the new schedule's page lacks its flash or its state")
	}
	if got := e.scheduleNames(); len(got) != 1 || got[0] != "nightly-patch" {
		t.Fatalf("schedules %v", got)
	}
}

// TestNewScheduleFormRefusesATakenNameUnlessReplaceIsTicked: a schedule
// of the same name is not quietly changed (and so sent back to approval):
// the name is refused at its field, unless the form says to replace it.
func TestNewScheduleFormRefusesATakenNameUnlessReplaceIsTicked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.applyPlaybook(schedulePlaybookDoc, "someone")
	b := e.browser().signIn("op")
	b.get("/ui/schedules/-/new")
	form := url.Values{"csrf": {b.csrf}, "name": {"nightly-patch"}, "cluster": {"prod"}, "playbook": {"nightly"},
		"cron": {"30 2 * * *"}, "do": {"create"}}
	if status, loc, _ := b.post("/ui/schedules/-/new", form); status != http.StatusSeeOther || loc != "/ui/schedules/nightly-patch?done=created" {
		t.Fatalf("create: %d to %q", status, loc)
	}
	digest := func() string {
		var d string
		_ = e.st.Read(context.Background(), func(rd store.Reader) error {
			sc, err := rd.Schedule(context.Background(), "nightly-patch")
			if err == nil {
				d = sc.Digest
			}
			return err
		})
		return d
	}
	first := digest()
	form.Set("cron", "0 4 * * *")
	status, _, body := b.post("/ui/schedules/-/new", form)
	if status != http.StatusBadRequest || !strings.Contains(body, `id="ns-name-error"`) || !strings.Contains(body, "replace it") {
		t.Fatalf("a taken name: %d, want a 400 at the name field\n%s", status, body)
	}
	if digest() != first {
		t.Fatal("a refused form changed the schedule of that name")
	}
	form.Set("replace", "on")
	if status, loc, _ := b.post("/ui/schedules/-/new", form); status != http.StatusSeeOther || loc != "/ui/schedules/nightly-patch?done=changed" {
		t.Fatalf("replace: %d to %q, want the schedule changed", status, loc)
	}
	if digest() == first {
		t.Fatal("replace did not change the schedule")
	}
}

func (e *env) scheduleNames() []string {
	e.t.Helper()
	var out []string
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		list, err := rd.Schedules(context.Background())
		for _, sc := range list {
			out = append(out, sc.Name)
		}
		return err
	})
	return out
}

// TestNewActionErrorsAreShownWhenOnlyTheClusterIs: a form whose cluster
// the visitor may not create on shows only the cluster's choice, with
// every error above it, and makes nothing.
func TestNewActionErrorsAreShownWhenOnlyTheClusterIs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("op")
	b.get("/ui/actions/new")
	before := e.actionCount()
	status, _, body := b.post("/ui/actions/new", url.Values{"csrf": {b.csrf}, "cluster": {"elsewhere"}, "node": {"db-1"},
		"kind": {"muster.io/debug.sleep"}})
	if status != http.StatusNotFound || !strings.Contains(body, `id="new-action-error"`) || !strings.Contains(body, "no such node") {
		t.Fatalf("a cluster that does not exist: %d, want 404 with the error shown\n%s", status, body)
	}
	if e.actionCount() != before {
		t.Fatal("the refused form made an action")
	}
}
