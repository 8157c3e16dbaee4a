package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// Issue 33, item 3 on real processes: a declared node whose agent is
// SIGKILLed past the grace makes the cluster ALERT naming it as missing,
// with one cluster.alert event; restarting it makes the cluster HEALTHY
// with one cluster.healthy event.
func TestDeclaredNodeKilledPastTheGraceAlertsAndReturns(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 2, clusterYAML: "    expect:\n      nodes: [node-1, node-2]\n      grace: 3s\n"})
	events := func(typ string) int {
		list, err := f.admin.Events(ctxT(t), 0, 500, client.EventFilter{Cluster: "e2e", Types: []string{typ}})
		if err != nil {
			return -1
		}
		return len(list.Events)
	}
	testwait.Within(t, 20*time.Second, "e2e HEALTHY with nothing missing", func() bool {
		c, err := f.admin.Cluster(ctxT(t), "e2e")
		return err == nil && c.Status == "HEALTHY" && c.Members != nil && len(c.Members.Missing) == 0
	})
	alerts, healthy := events("cluster.alert"), events("cluster.healthy")

	f.agents["node-2"].kill()
	testwait.Within(t, 30*time.Second, "e2e ALERT with node-2 missing", func() bool {
		c, err := f.admin.Cluster(ctxT(t), "e2e")
		return err == nil && c.Status == "ALERT" && strings.Contains(c.StatusReason, "missing: node-2") &&
			c.Members != nil && len(c.Members.Missing) == 1 && c.Members.Missing[0].ID == "node-2"
	})
	if got := events("cluster.alert"); got != alerts+1 {
		t.Fatalf("cluster.alert events: %d, want %d", got, alerts+1)
	}

	f.agents["node-2"].restart()
	testwait.Within(t, 30*time.Second, "e2e HEALTHY again", func() bool {
		c, err := f.admin.Cluster(ctxT(t), "e2e")
		return err == nil && c.Status == "HEALTHY" && c.Members != nil && len(c.Members.Missing) == 0
	})
	if got := events("cluster.healthy"); got != healthy+1 {
		t.Fatalf("cluster.healthy events: %d, want %d", got, healthy+1)
	}
	if got := events("cluster.alert"); got != alerts+1 {
		t.Fatalf("cluster.alert events after the return: %d, want %d", got, alerts+1)
	}
}
