package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// seedLargeRun stores a RUNNING run of one stage over nodes nodes: the
// first done nodes have a DONE child, the next flying a RUNNING one, the
// rest none yet.
func (e *env) seedLargeRun(nodes, done, flying int) (string, []string) {
	e.t.Helper()
	ctx := context.Background()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	id := action.NewID()
	at := time.Now().UTC().Add(-time.Minute)
	err := e.st.Update(ctx, func(tx store.Tx) error {
		r := &store.Run{ID: id, ClusterID: "prod", State: store.RunRunning, Requester: "op", ApprovedBy: "appr",
			Digest: strings.Repeat("d", 64), Stages: []store.RunStage{{Name: "main", Kind: kindPing,
				Target: store.Target{All: true}, Nodes: names, Args: json.RawMessage(`{}`), MaxConcurrency: limit.Limit{N: 10, Percent: true},
				OnFailure: "abort", DependsOn: []string{}, State: store.StageRunning}},
			CreatedTS: at, UpdatedTS: at}
		if err := tx.InsertRun(ctx, r); err != nil {
			return err
		}
		for i := range done + flying {
			state := action.Done
			if i >= done {
				state = action.Running
			}
			c := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: names[i], Kind: kindPing,
				Args: json.RawMessage(`{}`), State: state, Origin: action.OriginCore, Requester: "op", ApprovedBy: "appr",
				CreatedTS: at, UpdatedTS: at, RunID: id, Stage: "main", Wave: 1}}
			if err := tx.InsertAction(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id, names
}

func TestRunShowOfALargeRunHoldsItsCountsAndOnlyItsNodesInFlight(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id, _ := e.seedLargeRun(MaxShownNodes+50, 140, 3)
	var r wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+id, "viewer", nil, http.StatusOK, &r)
	st := r.Stages[0]
	if !r.NodesPaged || st.NodeCount != MaxShownNodes+50 || len(st.Nodes) != store.BriefNodes {
		t.Fatalf("paged %v, stage of %d nodes listing %d; want paged, %d nodes, the first %d listed",
			r.NodesPaged, st.NodeCount, len(st.Nodes), MaxShownNodes+50, store.BriefNodes)
	}
	if st.Counts["DONE"] != 140 || st.Counts["RUNNING"] != 3 || st.Counts["PENDING"] != 7 {
		t.Fatalf("counts %v, want DONE 140, RUNNING 3, PENDING 7", st.Counts)
	}
	if len(r.Children) != 3 {
		t.Fatalf("%d cells, want the 3 in flight: %+v", len(r.Children), r.Children)
	}
	for i, ch := range r.Children {
		if want := fmt.Sprintf("n%04d", 140+i); ch.NodeID != want || ch.State != action.Running || ch.ActionID == "" {
			t.Fatalf("cell %d = %+v, want %s RUNNING", i, ch, want)
		}
	}
}

func TestRunShowOfASmallRunHoldsEveryCell(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id, names := e.seedLargeRun(MaxShownNodes, 40, 2)
	var r wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+id, "viewer", nil, http.StatusOK, &r)
	if r.NodesPaged || len(r.Stages[0].Nodes) != len(names) || len(r.Children) != len(names) {
		t.Fatalf("paged %v, %d nodes, %d cells; want every one of %d", r.NodesPaged, len(r.Stages[0].Nodes), len(r.Children), len(names))
	}
	if r.Children[0].State != action.Done || r.Children[41].State != action.Running || r.Children[42].State != "" {
		t.Fatalf("cells %+v", r.Children[:43])
	}
}

func TestRunNodesPagesEveryCellOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id, names := e.seedLargeRun(250, 200, 5)
	var got []wire.RunChild
	marker, pages := "", 0
	for {
		var page wire.RunNodeList
		e.call(http.MethodGet, "/api/v1/runs/"+id[:8]+"/nodes?limit=60&marker="+marker, "viewer", nil, http.StatusOK, &page)
		pages++
		if len(page.Children) > 60 {
			t.Fatalf("page of %d cells, limit 60", len(page.Children))
		}
		got = append(got, page.Children...)
		if page.NextMarker == "" {
			break
		}
		marker = page.NextMarker
	}
	if pages != 5 || len(got) != len(names) {
		t.Fatalf("%d pages, %d cells; want 5 and %d", pages, len(got), len(names))
	}
	for i, ch := range got {
		want := action.State("")
		switch {
		case i < 200:
			want = action.Done
		case i < 205:
			want = action.Running
		}
		if ch.NodeID != names[i] || ch.State != want || ch.Stage != "main" {
			t.Fatalf("cell %d = %+v, want %s %q", i, ch, names[i], want)
		}
	}
	var def wire.RunNodeList
	e.call(http.MethodGet, "/api/v1/runs/"+id+"/nodes", "viewer", nil, http.StatusOK, &def)
	if len(def.Children) != MaxShownNodes || def.NextMarker != names[MaxShownNodes-1] {
		t.Fatalf("default page: %d cells, next %q", len(def.Children), def.NextMarker)
	}
}

func TestRunNodesRefusesABadMarkerOrLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id, _ := e.seedLargeRun(20, 0, 0)
	for _, c := range []struct{ query, field string }{
		{"marker=nope", "marker"}, {"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"page=2", "page"},
	} {
		d := e.fail(http.MethodGet, "/api/v1/runs/"+id+"/nodes?"+c.query, "viewer", nil, http.StatusBadRequest)
		if d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, c.field) {
			t.Errorf("%s: %+v, want a 400 naming %s", c.query, d, c.field)
		}
	}
	e.fail(http.MethodGet, "/api/v1/runs/"+action.NewID()+"/nodes", "viewer", nil, http.StatusNotFound)
}
