package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// scoped is a fleet of two clusters, prod and staging-1, with a thing of
// each kind on each, and people whose grants are scoped to staging-*.
type scoped struct {
	*env
	// ids of what each cluster holds, by cluster: actions, runs,
	// schedules, nodes; each must show on the pages of who may read the
	// cluster, and nowhere else.
	ids map[string][]string
	// prodAction, prodRun, prodSchedule: one of each on prod.
	prodAction, stgAction string
	prodRun, stgRun       string
	prodSchedule          string
}

// setupScoped adds cluster staging-1 (nodes db-1 and stg-down-9) beside
// prod (db-1 and prod-down-9), and on each: an action waiting for approval,
// a running one, a run waiting for approval and a schedule. stg is a token
// without roles whose team holds viewer on staging-*; stgappr one whose
// own grant is approver on staging-*.
func setupScoped(t *testing.T) *scoped {
	t.Helper()
	e := setup(t)
	ctx := context.Background()
	s := &scoped{env: e, ids: map[string][]string{}}
	now := time.Now().UTC()
	for _, who := range []string{"stg", "stgappr"} {
		sec, err := auth.CreateToken(ctx, e.st, who, nil, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[who] = sec
	}
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "staging-1", Status: store.ClusterHealthy, UpdatedTS: now}); err != nil {
			return err
		}
		for _, n := range []store.Node{
			{ClusterID: "staging-1", ID: "db-1", Status: store.NodeUp, LastContact: &now},
			{ClusterID: "staging-1", ID: "stg-down-9", Status: store.NodeDown},
			{ClusterID: "prod", ID: "prod-down-9", Status: store.NodeDown},
		} {
			n.Addr, n.Source, n.UpdatedTS = "127.0.0.1:1", store.SourceStatic, now
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		if err := tx.InsertTeam(ctx, &store.Team{Name: "stg-readers", Members: []string{"stg"}}); err != nil {
			return err
		}
		if err := tx.InsertGrant(ctx, &store.Grant{ID: "g-stg", Team: "stg-readers", Role: store.RoleViewer, Clusters: "staging-*"}); err != nil {
			return err
		}
		return tx.InsertGrant(ctx, &store.Grant{ID: "g-stgappr", Person: "stgappr", Role: store.RoleApprover, Clusters: "staging-*"})
	})
	s.ids["prod"] = append(s.ids["prod"], "prod-down-9")
	s.ids["staging-1"] = append(s.ids["staging-1"], "stg-down-9")
	for _, c := range []string{"prod", "staging-1"} {
		pend := s.action(c, action.PendingApprove)
		s.action(c, action.Running)
		var r *store.Run
		var sc *store.Schedule
		e.runChange(func(ctx context.Context, tx store.Tx) (err error) {
			r, err = e.engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: c, Stages: []wire.StageSpec{{Name: "sleep",
				Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`), Target: wire.Target{Nodes: []string{"db-1"}}}}},
				actions.Actor{Name: "op"})
			return err
		})
		e.applyPlaybook(schedulePlaybookDoc, "someone")
		e.runChange(func(ctx context.Context, tx store.Tx) (err error) {
			sc, _, err = e.schedules.Apply(ctx, tx, &wire.CreateScheduleRequest{Name: "nightly-" + strings.SplitN(c, "-", 2)[0],
				Cluster: c, Playbook: "nightly", Cron: "0 2 * * *", Timezone: "UTC"}, actions.Actor{Name: "op"})
			return err
		})
		s.ids[c] = append(s.ids[c], r.ID, sc.Name)
		if c == "prod" {
			s.prodAction, s.prodRun, s.prodSchedule = pend, r.ID, sc.Name
		} else {
			s.stgAction, s.stgRun = pend, r.ID
		}
	}
	return s
}

// action stores an action of cluster c on its db-1 in state, with its
// event, and returns its id.
func (s *scoped) action(c string, state action.State) string {
	s.t.Helper()
	t := action.UTC(time.Now())
	rec := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: c, NodeID: "db-1",
		Kind: "muster.io/debug.sleep", Args: []byte(`{"seconds":1}`), State: state, Progress: []byte("{}"),
		Origin: action.OriginCore, Requester: "op", CreatedTS: t, UpdatedTS: t}}
	s.runChange(func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertAction(ctx, rec); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionCreated, Actor: "op", ClusterID: c,
			NodeID: "db-1", ActionID: rec.ID, Message: "created"})
	})
	s.ids[c] = append(s.ids[c], rec.ID)
	return rec.ID
}

// shows reports which of ids a page shows (an action's or a run's by its
// first 8 characters: the pages show them short).
func shows(body string, ids []string) []string {
	var out []string
	for _, id := range ids {
		if action.ValidID(id) {
			id = id[:8]
		}
		if strings.Contains(body, id) {
			out = append(out, id)
		}
	}
	return out
}

// A person scoped to staging-* (a team's viewer grant, no token roles)
// uses every page: each shows what staging-1 holds and nothing of prod, the
// cluster pickers offer staging-1 alone, the live stream sends no prod
// event, and prod objects answer 404 as if they did not exist. A global
// viewer sees both clusters on the same pages.
func TestScopedViewerSeesNothingOfProdOnAnyPage(t *testing.T) {
	t.Parallel()
	s := setupScoped(t)
	stg := s.browser().signIn("stg")
	global := s.browser().signIn("viewer")
	// Where each page shows what: the Dashboard the running actions and
	// the nodes that are down, Approvals what waits (actions, runs,
	// schedules), the lists the rest.
	pages := map[string][]string{
		"/ui/dashboard": {"down-9"},
		"/ui/approvals": {"action", "run", "schedule"},
		"/ui/clusters":  {"down-9"},
		"/ui/actions":   {"action"},
		"/ui/runs":      {"run"},
		"/ui/events":    {"action"},
		"/ui/schedules": {"schedule"},
	}
	for page := range pages {
		status, _, body := stg.get(page)
		if status != http.StatusOK {
			t.Errorf("%s as stg: %d", page, status)
			continue
		}
		if got := shows(body, s.ids["prod"]); len(got) > 0 {
			t.Errorf("%s as stg shows prod's %v", page, got)
		}
		if len(shows(body, s.ids["staging-1"])) == 0 {
			t.Errorf("%s as stg shows nothing of staging-1", page)
		}
		if strings.Contains(body, `value="prod"`) || strings.Contains(body, "/ui/clusters/prod/") {
			t.Errorf("%s as stg offers or links cluster prod", page)
		}
		_, _, body = global.get(page)
		if len(shows(body, s.ids["prod"])) == 0 || len(shows(body, s.ids["staging-1"])) == 0 {
			t.Errorf("%s as a global viewer lacks one of the clusters", page)
		}
	}
	for _, c := range []struct{ id, page string }{{s.stgAction, "/ui/actions/"}, {s.stgRun, "/ui/runs/"}} {
		if status, _, _ := stg.get(c.page + c.id); status != http.StatusOK {
			t.Errorf("%s%s (staging) as stg: %d", c.page, c.id, status)
		}
	}
	for _, path := range []string{"/ui/actions/" + s.prodAction, "/ui/runs/" + s.prodRun, "/ui/schedules/" + s.prodSchedule,
		"/ui/clusters/prod/nodes/db-1", "/ui/clusters/prod/nodes/prod-down-9"} {
		status, _, body := stg.get(path)
		if status != http.StatusNotFound || !strings.Contains(body, "There is no such") {
			t.Errorf("%s as stg: %d, want the 404 page", path, status)
		}
		if status, _, _ := global.get(path); status != http.StatusOK {
			t.Errorf("%s as a global viewer: %d", path, status)
		}
	}
	if status, _, _ := stg.get("/ui/notifications"); status != http.StatusForbidden {
		t.Errorf("notifications as stg: %d, want 403", status)
	}

	// The stream: a prod event then a staging one; only the staging one
	// comes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.ts.URL+"/ui/stream", nil)
	resp, err := stg.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream as stg: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": stream open"
	prod := s.action("prod", action.PendingApprove)
	stgID := s.action("staging-1", action.PendingApprove)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, prod) || strings.Contains(line, `"cluster_id":"prod"`) {
			t.Fatalf("the stream sent stg a prod event: %s", line)
		}
		if strings.Contains(line, stgID) {
			return
		}
	}
	t.Fatalf("the staging event never came: %v", sc.Err())
}

// A person who approves on staging-* only: a prod action, run or schedule
// does not exist for their forms (404, nothing changes); a staging one is
// approved from its page.
func TestScopedApproverChangesNothingOfProd(t *testing.T) {
	t.Parallel()
	s := setupScoped(t)
	b := s.browser().signIn("stgappr")
	// With the digests a form would carry: only the cluster is wrong.
	runDigest := s.run(s.prodRun).Digest
	for path, digest := range map[string]string{"/ui/actions/" + s.prodAction + "/approve": "", "/ui/actions/" + s.prodAction + "/reject": "",
		"/ui/runs/" + s.prodRun + "/approve": runDigest, "/ui/runs/" + s.prodRun + "/reject": "", "/ui/schedules/" + s.prodSchedule + "/reject": ""} {
		status, _, body := b.post(path, url.Values{"csrf": {b.csrf}, "reason": {"no"}, "digest": {digest}})
		if status != http.StatusNotFound || !strings.Contains(body, "no such") {
			t.Errorf("POST %s as stgappr: %d, want 404", path, status)
		}
	}
	if got := s.record(s.prodAction).State; got != action.PendingApprove {
		t.Errorf("the prod action is %s after stgappr's posts", got)
	}
	if got := s.run(s.prodRun).State; got != store.RunPendingApprove {
		t.Errorf("the prod run is %s after stgappr's posts", got)
	}
	_, _, body := b.get("/ui/actions/" + s.stgAction)
	if !strings.Contains(body, `action="/ui/actions/`+s.stgAction+`/approve"`) {
		t.Fatalf("the staging action's page offers stgappr no Approve:\n%s", body)
	}
	status, _, _ := b.post("/ui/actions/"+s.stgAction+"/approve", url.Values{"csrf": {b.csrf}})
	if status != http.StatusSeeOther || s.record(s.stgAction).State == action.PendingApprove {
		t.Fatalf("approving the staging action as stgappr: %d, %s", status, s.record(s.stgAction).State)
	}
}

// A button is offered where its permission is held on the object's
// cluster: a person who approves on staging-* and reads everywhere sees
// Approve on a staging action and run, none on prod's, and reads why.
func TestButtonsFollowTheGrantOnTheObjectsCluster(t *testing.T) {
	t.Parallel()
	s := setupScoped(t)
	s.runChange(func(ctx context.Context, tx store.Tx) error {
		return tx.InsertGrant(ctx, &store.Grant{ID: "g-read-all", Person: "stgappr", Role: store.RoleViewer, Clusters: "*"})
	})
	b := s.browser().signIn("stgappr")
	for _, c := range []struct {
		page, id string
		approve  bool
	}{
		{"/ui/actions/", s.stgAction, true}, {"/ui/runs/", s.stgRun, true},
		{"/ui/actions/", s.prodAction, false}, {"/ui/runs/", s.prodRun, false},
	} {
		status, _, body := b.get(c.page + c.id)
		has := strings.Contains(body, `action="`+c.page+c.id+`/approve"`)
		if status != http.StatusOK || has != c.approve {
			t.Errorf("%s%s: %d, Approve offered %v, want %v", c.page, c.id, status, has, c.approve)
		}
		if !c.approve && !strings.Contains(body, "do not include approving on cluster prod") {
			t.Errorf("%s%s does not say why there is no Approve", c.page, c.id)
		}
	}
	_, _, body := b.get("/ui/approvals")
	if n := strings.Count(body, `class="approve"`); n != 3 {
		t.Errorf("Approvals offers %d Approve buttons, want 3 (the staging action, run and schedule)", n)
	}
}
