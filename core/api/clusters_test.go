package api

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

func TestClusters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var l wire.ClusterList
	e.call(http.MethodGet, "/api/v1/clusters", "viewer", nil, http.StatusOK, &l)
	if len(l.Clusters) != 2 || l.Clusters[0].ID != "prod" || l.Clusters[1].ID != "stage" {
		t.Fatalf("clusters %+v", l.Clusters)
	}
	if got, want := l.Clusters[0].NodeCounts, (wire.NodeCounts{Total: 2, Up: 1, Down: 1}); got != want {
		t.Fatalf("prod counts %+v, want %+v", got, want)
	}
	if got, want := l.Clusters[1].NodeCounts, (wire.NodeCounts{Total: 1, Unknown: 1}); got != want {
		t.Fatalf("stage counts %+v, want %+v", got, want)
	}
	if l.Clusters[0].Nodes != nil {
		t.Fatal("the list carries nodes")
	}

	var c wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &c)
	if c.ID != "prod" || len(c.Nodes) != 2 || c.Nodes[0].ID != "db-1" || strings.Join(c.Nodes[0].Kinds, ",") != kindPing+","+kindSleep {
		t.Fatalf("show prod %+v", c)
	}
	e.fail(http.MethodGet, "/api/v1/clusters/nope", "viewer", nil, http.StatusNotFound)

	var nodes wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes", "viewer", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) != 3 {
		t.Fatalf("nodes %+v", nodes)
	}
	e.call(http.MethodGet, "/api/v1/nodes?cluster=stage", "viewer", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != "s-1" {
		t.Fatalf("stage nodes %+v", nodes)
	}
	e.fail(http.MethodGet, "/api/v1/nodes?cluster=nope", "viewer", nil, http.StatusNotFound)
}

func TestNodeListFiltersByLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for q, want := range map[string]string{
		"label=role=replica":                    "db-2,s-1",
		"label=role=replica&label=zone=a":       "db-2",
		"label=role=replica,zone=a":             "db-2",
		"label=role=replica&cluster=stage":      "s-1",
		"label=zone=b":                          "",
		"":                                      "db-1,db-2,s-1",
		"label=role=primary&label=role=primary": "db-1",
		"label=role=primary&cluster=prod&label=zone=a": "db-1",
	} {
		var nodes wire.NodeList
		e.call(http.MethodGet, "/api/v1/nodes?"+q, "viewer", nil, http.StatusOK, &nodes)
		var ids []string
		for _, n := range nodes.Nodes {
			ids = append(ids, n.ID)
		}
		if got := strings.Join(ids, ","); got != want {
			t.Errorf("%s: nodes %s, want %s", q, got, want)
		}
	}
	var nodes wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?label=role=primary", "viewer", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Labels["role"] != "primary" || nodes.Nodes[0].Labels["zone"] != "a" {
		t.Fatalf("labels not shown: %+v", nodes.Nodes)
	}
	for _, bad := range []string{"label=role", "label=ro%20le=x", "label=role=a&label=role=b", "label==x", "label=role="} {
		e.fail(http.MethodGet, "/api/v1/nodes?"+bad, "viewer", nil, http.StatusBadRequest)
	}
}

func TestOrchestrateNudges(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.call(http.MethodPost, "/api/v1/clusters/stage/orchestrate", "op", nil, http.StatusAccepted, nil)
	if e.nudges.Count("stage") != 1 {
		t.Fatal("orchestrate did not nudge")
	}
	e.fail(http.MethodPost, "/api/v1/clusters/nope/orchestrate", "op", nil, http.StatusNotFound)
	if e.nudges.Count("nope") != 0 {
		t.Fatal("an unknown cluster was nudged")
	}
}

func TestHealthMetricsAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var h wire.Health
	e.call(http.MethodGet, "/health", "", nil, http.StatusOK, &h)
	if h.Status != "ok" {
		t.Fatalf("health %+v", h)
	}
	e.call(http.MethodGet, "/api/v1/clusters", "viewer", nil, http.StatusOK, nil)
	status, body := e.do(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `muster_core_api_requests_total{code="200",method="GET",route="/api/v1/clusters"}`) {
		t.Fatalf("metrics: %d %s", status, body)
	}
	d := e.fail(http.MethodGet, "/api/v1/nothing", "viewer", nil, http.StatusNotFound)
	if d.Code != wire.CodeNotFound {
		t.Fatalf("unknown route envelope %+v", d)
	}
	e.fail(http.MethodPut, "/api/v1/actions", "op", nil, http.StatusMethodNotAllowed)
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	s := New(Config{}, nil, nil, nil)
	if s.cfg.MaxSSEPerToken != DefaultMaxSSEPerToken || s.cfg.Policy.Load().Default != approval.Required {
		t.Fatalf("defaults %+v", s.cfg)
	}
}

func TestClusterShowsItsBudget(t *testing.T) {
	t.Parallel()
	two, _ := limit.Parse("2")
	e := setup(t, func(c *Config) {
		c.Budget = live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{"prod": two},
			Kinds: []budget.KindRule{{Kind: kindSleep, Disruptive: true}}})
	})
	now := time.Now().UTC()
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for i, r := range []store.Record{
			{Action: action.Action{NodeID: "db-1", State: action.Running}},
			{Action: action.Action{NodeID: "db-1", State: action.PendingSchedule, StateReason: "held by the disruption budget: 2 of 2 unavailable"}},
		} {
			r.ID, r.ClusterID, r.Kind, r.Origin = action.NewID(), "prod", kindSleep, action.OriginCore
			r.CreatedTS = now.Add(time.Duration(i) * time.Second)
			if err := tx.InsertAction(ctx, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var c wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &c)
	want := &wire.Budget{MaxUnavailable: "2", Max: 2, Unavailable: 2, Held: 1, Nodes: []wire.UnavailableNode{
		{ID: "db-1", Reason: budget.ReasonDisruptive}, {ID: "db-2", Reason: budget.ReasonDown}}}
	if !reflect.DeepEqual(c.Budget, want) {
		t.Fatalf("budget %+v, want %+v", c.Budget, want)
	}
	var stage wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/stage", "viewer", nil, http.StatusOK, &stage)
	if stage.ID != "stage" || stage.Budget != nil {
		t.Fatalf("a cluster without a budget shows %+v", stage.Budget)
	}
}
