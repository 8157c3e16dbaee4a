package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// levelsCore is the core of scenario 1 of the access issue: cluster
// prod-db-1 (its one node at agentAddr) where restarting a database is
// disruptive; team db (rita, dana, pat) holds approver on prod-db-*, team
// sre (sam, pat) approver on prod-*; work on prod-* needs one approval
// from db and one from sre.
func levelsCore(dataDir string, port int, agentAddr string) string {
	return fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
clusters:
  - id: prod-db-1
    nodes:
      - {id: db-1, addr: %q}
orchestrate:
  interval: 1s
  agent_timeout: 2s
kinds:
  - {kind: "example.com/db.restart", disruptive: true}
teams:
  - name: db
    members: [rita, dana, pat]
  - name: sre
    members: [sam, pat]
grants:
  - team: db
    role: approver
    clusters: "prod-db-*"
  - team: sre
    role: approver
    clusters: "prod-*"
approval:
  default: required
  ttl: 24h
  rules:
    - cluster: "prod-*"
      kind: "*"
      levels:
        - teams: [db]
          min: 1
        - teams: [sre]
          min: 1
`, dataDir, port, agentAddr)
}

// dbAgent is the agent of node db-1 of cluster prod-db-1, which knows the
// kind example.com/db.restart (a command that succeeds).
func dbAgent(t *testing.T) func() *proc {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	return func() *proc {
		cfg := fmt.Sprintf(`node_id: db-1
cluster_id: prod-db-1
data_dir: %s
api:
  addr: 127.0.0.1:%d
  insecure: true
actions:
  external:
    - kind: example.com/db.restart
      run: ["/bin/sh", "-c", "exit 0"]
`, filepath.Join(dir, "data"), freePort(t))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return &proc{t: t, bin: binary, name: "db-1", args: []string{"agent", "--config", path}, logPath: filepath.Join(dir, "db-1.log")}
	}
}

// Issue 32, scenario 1, on a real core and agent: team db holds approver
// on prod-db-*, team sre on prod-* (both from core.yaml), and the
// approvers are tokens without a global role, who hold approve only as
// members of those teams. A disruptive run on prod-db-1 needs one approval
// from db and one from sre. The requester's own approval is refused (she
// is of db); one from db leaves it PENDING_APPROVE showing "1 more from
// sre" (in the answer, in GET, in its event and in `muster run show`); a
// person in both teams counts once; the second approval, through `muster
// run approve`, starts it, and it runs to DONE.
func TestARunNeedsEveryLevel(t *testing.T) {
	t.Parallel()
	agent := startAll(t, dbAgent(t))[0]
	core, admin := accessCore(t, func(dataDir string, port int) string { return levelsCore(dataDir, port, agent.Addr()) })
	ctx := ctxT(t)
	env := func(secret string) []string {
		return []string{"MUSTER_ADDR=http://" + core.Addr(), "MUSTER_TOKEN=" + secret}
	}
	_, adminSecret := clientSecret(t, core, admin, "ada", "admin")
	// dana's token is made by the command line, with no role.
	danaFile := filepath.Join(t.TempDir(), "dana.token")
	if out := muster(t, env(adminSecret), "token", "create", "dana", "--grants-only",
		"--secret-file", danaFile); !strings.Contains(out, "Created token dana (roles ") {
		t.Fatalf("token create dana --grants-only: %s", out)
	}
	danaSecret, err := os.ReadFile(danaFile)
	if err != nil {
		t.Fatal(err)
	}
	dana := client.NewCore("http://"+core.Addr(), strings.TrimSpace(string(danaSecret)), &http.Client{Timeout: 10 * time.Second})
	rita := clientAs(t, core, admin, "rita", "operator")
	pat := clientAs(t, core, admin, "pat")
	_, samSecret := clientSecret(t, core, admin, "sam")
	toks, err := admin.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dana", "pat", "sam"} {
		if !slices.ContainsFunc(toks, func(tk wire.Token) bool { return tk.Name == name && len(tk.Roles) == 0 }) {
			t.Fatalf("%s's token holds a global role, or is missing: %+v", name, toks)
		}
	}
	testwait.Within(t, 20*time.Second, "db-1 UP", func() bool {
		ns, err := admin.Nodes(ctx, "prod-db-1")
		return err == nil && len(ns) == 1 && ns[0].Status == "UP"
	})

	r, err := rita.CreateRun(ctx, &wire.CreateRunRequest{ClusterID: "prod-db-1", Stages: []wire.StageSpec{{Name: "restart",
		Kind: "example.com/db.restart", Target: wire.Target{Nodes: []string{"db-1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = rita.Run(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if r.State != "PENDING_APPROVE" || r.Approval == nil || r.Approval.Missing != "1 more from db, 1 more from sre" {
		t.Fatalf("run %s %+v, want PENDING_APPROVE needing db and sre", r.State, r.Approval)
	}
	if l := r.Approval.Levels; len(l) != 2 || !slices.Equal(l[0].CanApprove, []string{"dana", "pat"}) ||
		!slices.Equal(l[1].CanApprove, []string{"pat", "sam"}) {
		t.Fatalf("who can approve: %+v (the requester is of db, and counts not)", l)
	}
	if _, err := rita.ApproveRun(ctx, r.ID, r.Digest); statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "rita requested") {
		t.Fatalf("the requester's approval: %v, want a 403 saying rita requested it", err)
	}

	// pat is in both teams: the approval counts once, at db.
	got, err := pat.ApproveRun(ctx, r.ID, r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "PENDING_APPROVE" || got.Approval == nil || got.Approval.Missing != "1 more from sre" ||
		!slices.Equal(got.Approval.Levels[0].ApprovedBy, []string{"pat"}) {
		t.Fatalf("after pat: %s %+v", got.State, got.Approval)
	}
	if _, err := pat.ApproveRun(ctx, r.ID, r.Digest); statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "approved it already") {
		t.Fatalf("pat again: %v, want a 403", err)
	}
	if _, err := dana.ApproveRun(ctx, r.ID, r.Digest); statusOf(err) != http.StatusForbidden ||
		!strings.Contains(err.Error(), "the levels dana may approve are met: 1 more from sre") {
		t.Fatalf("dana after pat: %v, want a 403", err)
	}
	shown, err := dana.Run(ctx, r.ID)
	if err != nil || shown.State != "PENDING_APPROVE" || shown.Approval == nil || shown.Approval.Missing != "1 more from sre" ||
		shown.Approval.Lines[0] != "level 1 (db): 1 of 1 — approved by pat" ||
		shown.Approval.Lines[1] != "level 2 (sre): 0 of 1 — can approve: sam" {
		t.Fatalf("GET after pat: %v %+v", err, shown)
	}
	out := muster(t, env(strings.TrimSpace(string(danaSecret))), "run", "show", r.ID)
	for _, want := range []string{"PENDING_APPROVE", "level 1 (db): 1 of 1 — approved by pat",
		"level 2 (sre): 0 of 1 — can approve: sam", "Still needed: 1 more from sre."} {
		if !strings.Contains(out, want) {
			t.Fatalf("muster run show lacks %q:\n%s", want, out)
		}
	}
	evs, err := admin.Events(ctx, 0, 100, client.EventFilter{RunID: r.ID, Types: []string{"run.approval_recorded"}})
	if err != nil || len(evs.Events) != 1 || evs.Events[0].Actor != "pat" ||
		!strings.Contains(evs.Events[0].Message, "at level 1 (db): 1 more from sre") {
		t.Fatalf("events %+v, %v", evs, err)
	}

	out = muster(t, env(samSecret), "run", "approve", r.ID)
	if !strings.Contains(out, "Approved run "+r.ID) {
		t.Fatalf("muster run approve as sam:\n%s", out)
	}
	testwait.Within(t, 30*time.Second, "the run DONE", func() bool {
		cur, err := admin.Run(ctx, r.ID)
		return err == nil && cur.State == "DONE"
	})
	done, err := admin.Run(ctx, r.ID)
	if err != nil || !strings.Contains(done.ApprovedBy, "sam") {
		t.Fatalf("the run done: %v %+v", err, done)
	}
}
