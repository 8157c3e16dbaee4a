package api

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 3 at the API: the list and the cluster show its missing
// and unexpected nodes; a caller who cannot see the cluster sees neither.
func TestClustersShowDeclaredMembers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.opsCfg.Members = live.New(nodes.Membership{
		"prod":  {Nodes: []string{"db-1", "db-3"}},
		"stage": {Count: 2, Selector: map[string]string{"role": "replica"}},
	})
	e.srv.ops = ops.New(e.opsCfg)

	wantProd := &wire.Members{Missing: []wire.MissingNode{{ID: "db-3", Reason: "never seen"}}, Unexpected: []string{"db-2"}}
	wantStage := &wire.Members{Missing: []wire.MissingNode{{Reason: "2 of 2 nodes matching role=replica"}}, Unexpected: []string{}}
	var l wire.ClusterList
	e.call(http.MethodGet, "/api/v1/clusters", "viewer", nil, http.StatusOK, &l)
	if len(l.Clusters) != 2 || !reflect.DeepEqual(l.Clusters[0].Members, wantProd) || !reflect.DeepEqual(l.Clusters[1].Members, wantStage) {
		t.Fatalf("clusters %+v", l.Clusters)
	}
	var c wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &c)
	if !reflect.DeepEqual(c.Members, wantProd) {
		t.Fatalf("prod members %+v", c.Members)
	}
	l = wire.ClusterList{}
	e.call(http.MethodGet, "/api/v1/clusters", "stg", nil, http.StatusOK, &l)
	if len(l.Clusters) != 1 || l.Clusters[0].ID != "stage" {
		t.Fatalf("clusters as stg %+v", l.Clusters)
	}
	e.call(http.MethodGet, "/api/v1/clusters/prod", "stg", nil, http.StatusNotFound, nil)

	e.opsCfg.Members = live.New(nodes.Membership{})
	e.srv.ops = ops.New(e.opsCfg)
	c = wire.Cluster{}
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &c)
	if c.Members != nil {
		t.Fatalf("a cluster declaring nothing shows members %+v", c.Members)
	}
}
