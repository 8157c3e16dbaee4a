package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 32, scenario 2 at the API: a caller scoped to stage* lists
// clusters, nodes, actions and events and sees nothing of prod; a prod id
// answers 404, a stage one 200.
func TestAScopedCallerSeesNothingOfOtherClusters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})

	var cl wire.ClusterList
	e.call(http.MethodGet, "/api/v1/clusters", "stg", nil, http.StatusOK, &cl)
	if len(cl.Clusters) != 1 || cl.Clusters[0].ID != "stage" {
		t.Errorf("clusters as stg = %+v, want stage alone", cl.Clusters)
	}
	e.call(http.MethodGet, "/api/v1/clusters/stage", "stg", nil, http.StatusOK, nil)
	e.call(http.MethodGet, "/api/v1/clusters/prod", "stg", nil, http.StatusNotFound, nil)
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "stg", nil, http.StatusNotFound, nil)

	var nodes wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes", "stg", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].ClusterID != "stage" {
		t.Errorf("nodes as stg = %+v, want s-1 alone", nodes.Nodes)
	}
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "stg", nil, http.StatusOK, &acts)
	if len(acts.Actions) != 0 {
		t.Errorf("actions as stg = %d, want none", len(acts.Actions))
	}
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	if len(acts.Actions) != 1 {
		t.Errorf("actions as a global viewer = %d, want 1", len(acts.Actions))
	}
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "stg", nil, http.StatusNotFound, nil)
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "stg", nil, http.StatusNotFound, nil)

	var evs wire.EventList
	e.call(http.MethodGet, "/api/v1/events", "stg", nil, http.StatusOK, &evs)
	for _, ev := range evs.Events {
		if ev.ClusterID != "stage" {
			t.Errorf("event %d (%s, cluster %q) shown to stg", ev.Seq, ev.Type, ev.ClusterID)
		}
	}
	e.call(http.MethodGet, "/api/v1/events", "viewer", nil, http.StatusOK, &evs)
	if len(evs.Events) == 0 {
		t.Error("a global viewer sees no event")
	}
}

// Issue 32, item 5: a grant beyond the caller's admin scope is refused
// (403) and changes nothing; one within it is made, and an event names who
// made it.
func TestNobodyGrantsMoreThanTheyHold(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, scope := range []wire.CreateGrantRequest{
		{Person: "stg", Role: "admin", Clusters: "*"},
		{Person: "stg", Role: "viewer", Clusters: "prod"},
		{Person: "olga", Role: "viewer", Labels: map[string]string{"tier": "stage"}},
	} {
		e.call(http.MethodPost, "/api/v1/grants", "stg", scope, http.StatusForbidden, nil)
	}
	var g wire.Grant
	e.call(http.MethodPost, "/api/v1/grants", "stg", wire.CreateGrantRequest{Person: "olga", Role: "operator", Clusters: "stage-eu*"},
		http.StatusCreated, &g)
	var gl wire.GrantList
	e.call(http.MethodGet, "/api/v1/grants", "stg", nil, http.StatusOK, &gl)
	if len(gl.Grants) != 2 { // its team's own, and olga's
		t.Errorf("grants stg sees = %+v, want its team's and olga's", gl.Grants)
	}
	var evs wire.EventList
	e.call(http.MethodGet, "/api/v1/events?type=grant.*", "admin", nil, http.StatusOK, &evs)
	if len(evs.Events) != 1 || evs.Events[0].Actor != "stg" || evs.Events[0].Type != "grant.created" {
		t.Errorf("grant events = %+v, want one grant.created by stg", evs.Events)
	}
	e.call(http.MethodDelete, "/api/v1/grants/stg-admin", "stg", nil, http.StatusNoContent, nil)
	// Its only grant revoked, stg holds nothing: every route refuses it.
	e.call(http.MethodGet, "/api/v1/clusters/stage", "stg", nil, http.StatusForbidden, nil)
}

// replicasOf is a ReplicaLister of one replica holding the leases of
// clusters.
type replicasOf []string

func (r replicasOf) Replicas(context.Context) (*wire.CoreReplicas, error) {
	out := &wire.CoreReplicas{Replicas: []wire.CoreReplica{{ID: "r1"}}}
	for _, c := range r {
		out.Replicas[0].Leases = append(out.Replicas[0].Leases, wire.ClusterLease{ClusterID: c})
	}
	return out, nil
}

// The replicas' leases name clusters: a scoped caller sees its own alone.
func TestReplicasShowTheLeasesOfVisibleClusters(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.Replicas = replicasOf{"prod", "stage"} })
	for who, want := range map[string]int{"stg": 1, "viewer": 2} {
		var out wire.CoreReplicas
		e.call(http.MethodGet, "/api/v1/core/replicas", who, nil, http.StatusOK, &out)
		if len(out.Replicas) != 1 || len(out.Replicas[0].Leases) != want {
			t.Errorf("replicas as %s = %+v, want %d leases", who, out, want)
		}
	}
}

// An id prefix matching actions of a cluster the caller may not read
// names only those it may: never an ambiguity that tells the others exist.
func TestAPrefixNamesOnlyVisibleActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.update(func(ctx context.Context, tx store.Tx) error {
		for i, c := range map[string]string{"prod": "db-1", "stage": "s-1"} {
			rec := &store.Record{Action: action.Action{ID: "abcdef01-0000-4000-8000-00000000000" + map[string]string{"prod": "1", "stage": "2"}[i],
				ClusterID: i, NodeID: c, Kind: kindPing, Args: []byte(`{}`), State: action.PendingApprove,
				Origin: action.OriginCore, TimeoutS: 60, CreatedTS: time.Now(), UpdatedTS: time.Now(), Progress: []byte(`{}`)}}
			if err := tx.InsertAction(ctx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	var a action.Action
	e.call(http.MethodGet, "/api/v1/actions/abcdef01", "stg", nil, http.StatusOK, &a)
	if a.ClusterID != "stage" {
		t.Errorf("the prefix names %s's action for stg, want stage's", a.ClusterID)
	}
	e.call(http.MethodGet, "/api/v1/actions/abcdef01", "viewer", nil, http.StatusConflict, nil)
	e.call(http.MethodPost, "/api/v1/actions/abcdef01-0000-4000-8000-000000000001/reject", "stg", nil, http.StatusNotFound, nil)
}
