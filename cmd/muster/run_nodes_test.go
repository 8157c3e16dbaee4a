package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
)

// storeLargeRun stores a RUNNING run of cluster prod over nodes nodes
// (n0000…): the first done have a DONE child, the next flying a RUNNING
// one, and the stage counts them as its last advance would have.
func (e *cliEnv) storeLargeRun(nodes, done, flying int) string {
	e.t.Helper()
	ctx := context.Background()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	id := action.NewID()
	now := time.Now().UTC()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertRun(ctx, &store.Run{ID: id, ClusterID: "prod", State: store.RunRunning, Requester: "op",
			ApprovedBy: "appr", Digest: "d", CreatedTS: now, UpdatedTS: now,
			Stages: []store.RunStage{{Name: "restart", Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`),
				Nodes: names, MaxConcurrency: limit.Limit{N: 10, Percent: true}, OnFailure: "abort",
				DependsOn: []string{}, State: store.StageRunning, Done: done, InFlight: flying}}}); err != nil {
			return err
		}
		for i := range done + flying {
			st := action.Done
			if i >= done {
				st = action.Running
			}
			if err := tx.InsertAction(ctx, &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod",
				NodeID: names[i], Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`), State: st,
				Origin: action.OriginCore, Requester: "op", ApprovedBy: "appr", CreatedTS: now, UpdatedTS: now,
				RunID: id, Stage: "restart", Wave: 1}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestRunShowOfALargeRunShowsItsCountsAndNodesInFlight: run show of a run
// of more than 100 nodes shows the stage's counts and the nodes in flight
// alone, and says how to list every node; run nodes pages them.
func TestRunShowOfALargeRunShowsItsCountsAndNodesInFlight(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	id := e.storeLargeRun(150, 120, 2)
	show, msg, code := e.run("op", "run", "show", id)
	if code != 0 {
		t.Fatalf("run show: %d %q", code, msg)
	}
	for _, want := range []string{"120/150", "done 120", "in flight 2", "waiting 28", "2 nodes in flight shown; `muster run nodes " + id[:8] + "`",
		"Nodes in flight:", "n0120", "n0121"} {
		if !strings.Contains(show, want) {
			t.Errorf("run show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "n0119") || strings.Contains(show, "n0122") {
		t.Errorf("run show lists nodes not in flight:\n%s", show)
	}
	page, msg, code := e.run("op", "run", "nodes", "--limit", "60", id)
	if code != 0 || !strings.Contains(page, "n0000") || !strings.Contains(page, "n0059") || strings.Contains(page, "n0060") ||
		!strings.Contains(page, "More: muster run nodes "+id[:8]+" --marker n0059") {
		t.Fatalf("run nodes: %d %q\n%s", code, msg, page)
	}
	last, msg, code := e.run("op", "run", "nodes", "--limit", "60", "--marker", "n0119", id)
	if code != 0 || !strings.Contains(last, "n0120") || !strings.Contains(last, "n0149") || strings.Contains(last, "More:") {
		t.Fatalf("run nodes, last page: %d %q\n%s", code, msg, last)
	}
	// An approval shows how many nodes the list left out.
	approve, _, _ := e.run("appr", "run", "approve", id)
	if !strings.Contains(approve, "n0009 and 140 more (max_concurrency") {
		t.Errorf("run approve does not say how many nodes are not listed:\n%s", approve)
	}
	if _, msg, code := e.run("op", "run", "nodes", "--marker", "nope", id); code == 0 || !strings.Contains(msg, "marker") {
		t.Fatalf("a bad marker: %d %q", code, msg)
	}
}
