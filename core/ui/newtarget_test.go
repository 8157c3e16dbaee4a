package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// withLabelledNodes gives prod nodes db-1 and db-2 (role=db, the schema
// kind, db-2's schema capping seconds at 5) and web-1 (role=web).
func (e *env) withLabelledNodes() {
	e.t.Helper()
	now := time.Now().UTC()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		for _, n := range []store.Node{
			{ID: "db-1", Labels: map[string]string{"role": "db"}},
			{ID: "db-2", Labels: map[string]string{"role": "db"}, ArgsSchemas: map[string]json.RawMessage{schemaKind: json.RawMessage(
				`{"type":"object","properties":{"seconds":{"type":"integer","maximum":5}}}`)}},
			{ID: "web-1", Labels: map[string]string{"role": "web"}},
		} {
			n.ClusterID, n.Addr, n.Source, n.Status, n.UpdatedTS, n.LastContact = "prod", "127.0.0.1:1", store.SourceStatic, store.NodeUp, now, &now
			n.Kinds = []string{schemaKind}
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestNewActionFormOverLabels: labels instead of a node make one action per
// node they pick, and the answer says how many with a link to each; args
// one node's schema refuses, labels matching nothing, or a node and labels
// both are refused next to their field and make nothing.
func TestNewActionFormOverLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withLabelledNodes()
	b := e.browser().signIn("op")
	status, _, body := b.get("/ui/actions/new?cluster=prod")
	if status != http.StatusOK || !strings.Contains(body, `id="na-target"`) {
		t.Fatalf("the form has no labels field: %d", status)
	}
	for name, tc := range map[string]struct {
		set   map[string]string
		field string
		says  string
	}{
		"args db-2 refuses": {map[string]string{"target": "role=db", "args": `{"seconds":9}`}, "na-args-error", "db-2"},
		"labels match none": {map[string]string{"target": "role=cache"}, "na-target-error", "role=cache"},
		"node and labels":   {map[string]string{"target": "role=db", "node": "db-1"}, "na-target-error", "not both"},
		"bad labels":        {map[string]string{"target": "role"}, "na-target-error", "pairs"},
		"neither":           {map[string]string{}, "na-node-error", "labels"},
	} {
		form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "kind": {schemaKind}, "args": {`{"seconds":1}`}}
		for k, v := range tc.set {
			form.Set(k, v)
		}
		status, _, body := b.post("/ui/actions/new", form)
		i := strings.Index(body, `id="`+tc.field+`"`)
		if status < 400 || status >= 500 || i < 0 || !strings.Contains(body[i:min(len(body), i+300)], tc.says) {
			t.Errorf("%s: %d, want a 4xx saying %q at %s\n%s", name, status, tc.says, tc.field, body)
		}
		if n := e.actionCount(); n != 0 {
			t.Errorf("%s: a refused form made %d actions", name, n)
		}
	}
	form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "kind": {schemaKind}, "args": {`{"seconds":2}`}, "target": {"role=db"}}
	status, _, body = b.post("/ui/actions/new", form)
	if status != http.StatusOK || !strings.Contains(body, "2 actions created") {
		t.Fatalf("create over role=db: %d\n%s", status, body)
	}
	var recs []store.Record
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		recs, _, err = store.ActionPage(context.Background(), rd, store.ListQuery{Limit: 10})
		return err
	})
	if len(recs) != 2 {
		t.Fatalf("%d actions stored, want 2", len(recs))
	}
	for _, r := range recs {
		if !strings.Contains(body, `href="/ui/actions/`+r.ID+`"`) || r.Requester != "op" || r.NodeID == "web-1" {
			t.Errorf("action %s on %s by %s: not linked, or not what was asked", r.ID, r.NodeID, r.Requester)
		}
	}
}

// TestNewActionFormOverLabelsRepostedMakesNothingNew: the form carries a
// request_id of its own, so posting it again (a refresh of the answer, or
// a double click) answers the actions the first post made and creates none;
// the answer's form carries a new one, so that a deliberate second submit
// makes a new batch.
func TestNewActionFormOverLabelsRepostedMakesNothingNew(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withLabelledNodes()
	b := e.browser().signIn("op")
	_, _, page := b.get("/ui/actions/new?cluster=prod")
	rid := hiddenValue(t, page, "request_id")
	form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "kind": {schemaKind}, "args": {`{"seconds":2}`},
		"target": {"role=db"}, "request_id": {rid}}
	status, _, first := b.post("/ui/actions/new", form)
	if status != http.StatusOK || !strings.Contains(first, "2 actions created") {
		t.Fatalf("create over role=db: %d\n%s", status, first)
	}
	status, _, again := b.post("/ui/actions/new", form)
	if status != http.StatusOK || !strings.Contains(again, "2 actions created") {
		t.Fatalf("the same form posted again: %d\n%s", status, again)
	}
	if n := e.actionCount(); n != 2 {
		t.Fatalf("posting the form twice made %d actions, want 2", n)
	}
	next := hiddenValue(t, first, "request_id")
	if next == rid || next == "" {
		t.Fatalf("the answer's form carries request_id %q, want a new one (was %q)", next, rid)
	}
	form.Set("request_id", next)
	if status, _, _ := b.post("/ui/actions/new", form); status != http.StatusOK || e.actionCount() != 4 {
		t.Fatalf("a second submit: %d, %d actions, want 4", status, e.actionCount())
	}
}

// hiddenValue is the value of the hidden input name of page.
func hiddenValue(t *testing.T, page, name string) string {
	t.Helper()
	k := `name="` + name + `" value="`
	i := strings.Index(page, k)
	if i < 0 {
		t.Fatalf("no hidden %s in the page", name)
	}
	v := page[i+len(k):]
	return v[:strings.IndexByte(v, '"')]
}
