package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 6 (scenario 6) on real processes: a cluster declares
// node-1 and node-2 and names an on_alert playbook, approved by bob. When
// node-2's agent is killed past the grace, the cluster goes ALERT and the
// core starts the playbook once, with node-2 as the parameter `missing`;
// it ends DONE, and the core does not start it again while the alert
// lasts, however many syncs and passes go by.
func TestOnAlertPlaybookRunsOncePerAlert(t *testing.T) {
	t.Parallel()
	start := time.Now()
	f := newFleetWith(t, fleetOptions{nodes: 2, clusterYAML: `    expect:
      nodes: [node-1, node-2]
      grace: 2s
      on_alert:
        playbook: heal
        params: {service: web}
`})
	const doc = `name: heal
params:
  - {name: missing, type: string}
  - {name: service, type: string}
stages:
  - name: restart
    kind: example.com/append
    target: {nodes: [node-1]}
    args: {note: "restart {{ .service }} of {{ .missing }}"}
`
	if _, err := f.admin.ApplyPlaybook(ctxT(t), doc); err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.ApproveOnAlert(ctxT(t), "e2e", ""); err != nil {
		t.Fatal(err)
	}
	cluster := func() *wire.Cluster {
		c, err := f.admin.Cluster(ctxT(t), "e2e")
		if err != nil {
			return &wire.Cluster{}
		}
		return c
	}
	if a := cluster().OnAlert; a == nil || !a.Approved || a.ApprovedBy != "bob" || a.Problem != "" {
		t.Fatalf("on_alert after the approval: %+v", a)
	}
	runsOf := func() []wire.Run {
		list, err := f.admin.Runs(ctxT(t), client.RunFilter{Cluster: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		return list.Runs
	}
	if len(runsOf()) != 0 {
		t.Fatal("a run before any alert")
	}

	f.agents["node-2"].kill()
	t.Cleanup(func() {
		if t.Failed() {
			c := cluster()
			t.Logf("cluster %s %s, on_alert %+v", c.Status, c.StatusReason, c.OnAlert)
			evs, _ := f.admin.Events(ctxT(t), 0, 500, client.EventFilter{Cluster: "e2e"})
			for _, e := range evs.Events {
				t.Logf("event %s %s", e.Type, e.Message)
			}
		}
	})
	testwait.Within(t, 30*time.Second, "the on_alert run DONE", func() bool {
		a := cluster().OnAlert
		return a != nil && a.Outcome == "DONE"
	})
	c := cluster()
	if c.Status != "ALERT" || c.OnAlert.Alerts != 1 || len(c.OnAlert.Missing) != 1 || c.OnAlert.Missing[0] != "node-2" {
		t.Fatalf("cluster after the run: %s, on_alert %+v", c.Status, c.OnAlert)
	}
	list := runsOf()
	if len(list) != 1 || list[0].ID != c.OnAlert.RunID || list[0].ApprovedBy != "bob" || list[0].Playbook != "heal" {
		t.Fatalf("runs %+v", list)
	}
	r, err := f.admin.Run(ctxT(t), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Stages[0].Args), "restart web of node-2") {
		t.Fatalf("the run's args %s: want the missing node", r.Stages[0].Args)
	}
	// The alert lasts: more syncs and passes start nothing more.
	passes := f.passes()
	testwait.Within(t, 20*time.Second, "three more passes", func() bool { return f.passes() >= passes+3 })
	if list := runsOf(); len(list) != 1 {
		t.Fatalf("%d runs while the same alert lasts, want 1", len(list))
	}
	evs, err := f.admin.Events(ctxT(t), 0, 500, client.EventFilter{Cluster: "e2e", Types: []string{"cluster.on_alert_started"}})
	if err != nil || len(evs.Events) != 1 {
		t.Fatalf("on_alert_started events %+v, %v", evs, err)
	}
	if out := muster(t, []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["admin"]}, "cluster", "show", "e2e"); !strings.Contains(out, "On alert: playbook heal (v1), approved by bob") ||
		!strings.Contains(out, "last alert (1 in all): run "+list[0].ID+", DONE") {
		t.Fatalf("cluster show:\n%s", out)
	}
	t.Logf("scenario 6 took %s", time.Since(start).Round(time.Millisecond))
}
