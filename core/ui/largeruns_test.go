package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// seedRuns stores n runs of one stage on nodes nodes of cluster prod,
// directly in the store, in state (PENDING_APPROVE: no children; RUNNING:
// a child per node, a quarter of them FAILED and the rest DONE), created
// from start on, a millisecond apart. It returns their ids, oldest first.
func seedRuns(tb testing.TB, st store.Store, n, nodes int, state string, start time.Time) []string {
	tb.Helper()
	ctx := context.Background()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d.prod.example.com", i)
	}
	ids := make([]string, n)
	const perTx = 20_000 // children per transaction
	for i := 0; i < n; {
		err := st.Update(ctx, func(tx store.Tx) error {
			j, kids := i, 0
			for ; j < n && (kids == 0 || kids+nodes <= perTx); j++ {
				at := start.Add(time.Duration(j) * time.Millisecond)
				ids[j] = action.NewID()
				r := &store.Run{ID: ids[j], ClusterID: "prod", State: state, Requester: "op", Digest: strings.Repeat("d", 64),
					Stages: []store.RunStage{{Name: "main", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
						Target: store.Target{All: true}, Nodes: names, MaxConcurrency: limit.Limit{N: 10, Percent: true},
						OnFailure: "abort", DependsOn: []string{}, State: store.StagePending}},
					CreatedTS: at, UpdatedTS: at}
				if state == store.RunPendingApprove {
					if err := tx.InsertRun(ctx, r); err != nil {
						return err
					}
					continue
				}
				r.ApprovedBy, r.Stages[0].State = "appr", store.StageRunning
				// Every fourth node failed, the others are done: as the
				// run's last advance stored it.
				for k, node := range names {
					if k%4 == 0 {
						r.Stages[0].Failed = append(r.Stages[0].Failed, node)
					}
				}
				r.Stages[0].Done = nodes - len(r.Stages[0].Failed)
				if err := tx.InsertRun(ctx, r); err != nil {
					return err
				}
				for k, node := range names {
					c := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: node,
						Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`), State: action.Done,
						Origin: action.OriginCore, Requester: "op", ApprovedBy: "appr", CreatedTS: at, UpdatedTS: at,
						RunID: r.ID, Stage: "main", Wave: k/100 + 1}}
					if k%4 == 0 {
						c.State, c.StateReason = action.Failed, "exit status 1"
					}
					if err := tx.InsertAction(ctx, c); err != nil {
						return err
					}
				}
				kids += nodes
			}
			i = j
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// getAs fetches path with who's API token and returns the status and body.
func (e *env) getAs(tb testing.TB, who, path string) (int, []byte) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.secrets[who])
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

var runCardRE = regexp.MustCompile(`<li class="card approval run[^"]*" data-run="([^"]+)"`)

// TestLargeRunsKeepApprovalsAndRunListsSmall: the Approvals page, the Runs
// page and GET /api/v1/runs show each stage's first nodes and its counts,
// a page of runs at a time, so their size does not grow with the number of
// nodes and children of the runs they show.
func TestLargeRunsKeepApprovalsAndRunListsSmall(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const nodes = 2000
	start := time.Now().UTC().Add(-time.Hour)
	pending := seedRuns(t, e.st, 60, nodes, store.RunPendingApprove, start)
	running := seedRuns(t, e.st, 5, nodes, store.RunRunning, start.Add(time.Minute))

	// Approvals: the oldest page of runs, each with its first nodes and
	// how many it has, and a link to the next page.
	appr := e.browser().signIn("appr")
	status, _, body := appr.get("/ui/approvals")
	if status != http.StatusOK || len(body) > 256<<10 {
		t.Fatalf("approvals: %d, %d KB; want 200 and at most 256 KB", status, len(body)>>10)
	}
	shown := func(body string) []string {
		var ids []string
		for _, m := range runCardRE.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	if got := shown(body); !slices.Equal(got, pending[:runsPerPage]) {
		t.Fatalf("approvals shows %d runs, want the oldest %d in order", len(got), runsPerPage)
	}
	for _, want := range []string{fmt.Sprintf("%d: node-00000.prod.example.com", nodes),
		fmt.Sprintf("and %d more", nodes-store.BriefNodes), `id="runs-next"`} {
		if !strings.Contains(body, want) {
			t.Errorf("approvals lacks %q", want)
		}
	}
	if strings.Contains(body, fmt.Sprintf("node-%05d.", store.BriefNodes)) {
		t.Errorf("approvals lists node %d of its runs", store.BriefNodes)
	}
	next := regexp.MustCompile(`href="([^"]+)" id="runs-next"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("approvals has no link to its next page")
	}
	_, _, body = appr.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if got := shown(body); !slices.Equal(got, pending[runsPerPage:]) || strings.Contains(body, `id="runs-next"`) {
		t.Fatalf("the next page shows %d runs (next link: %v), want the last %d", len(got),
			strings.Contains(body, `id="runs-next"`), len(pending)-runsPerPage)
	}
	_, _, live := appr.get(strings.ReplaceAll(next[1], "&amp;", "&") + "&part=live")
	if got := shown(live); !slices.Equal(got, pending[runsPerPage:]) {
		t.Fatalf("the next page's live part shows %d runs, want the last %d", len(got), len(pending)-runsPerPage)
	}
	for _, bad := range []string{"/ui/approvals?marker=nope", "/ui/approvals?marker=" + action.NewID()} {
		if status, _, _ := appr.get(bad); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, status)
		}
	}

	// The API's list: every run of the page, each stage with its first
	// nodes, node_count and the counts of its children.
	status, raw := e.getAs(t, "viewer", "/api/v1/runs?limit=200")
	if status != http.StatusOK || len(raw) > 256<<10 {
		t.Fatalf("GET /api/v1/runs?limit=200: %d, %d KB; want 200 and at most 256 KB", status, len(raw)>>10)
	}
	var list wire.RunList
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runs) != len(pending)+len(running) || list.Runs[0].ID != running[len(running)-1] {
		t.Fatalf("the list has %d runs, newest %s; want %d, newest %s", len(list.Runs), list.Runs[0].ID,
			len(pending)+len(running), running[len(running)-1])
	}
	failed := (nodes + 3) / 4
	for _, r := range list.Runs {
		st := r.Stages[0]
		want := map[string]int{"PENDING": nodes}
		errs := 0
		if r.State == store.RunRunning {
			want, errs = map[string]int{"PENDING": 0, "DONE": nodes - failed, "FAILED": failed}, failed
		}
		if len(st.Nodes) != store.BriefNodes || st.NodeCount != nodes || !mapsEqual(st.Counts, want) || st.Errors != errs {
			t.Fatalf("run %s (%s): %d nodes listed of %d, counts %v, errors %d; want %d of %d, %v, %d", r.ID, r.State,
				len(st.Nodes), st.NodeCount, st.Counts, st.Errors, store.BriefNodes, nodes, want, errs)
		}
	}

	// The Runs page: the same progress, and no node list.
	viewer := e.browser().signIn("viewer")
	status, _, body = viewer.get("/ui/runs")
	if status != http.StatusOK || len(body) > 256<<10 {
		t.Fatalf("runs page: %d, %d KB; want 200 and at most 256 KB", status, len(body)>>10)
	}
	if want := fmt.Sprintf("%d of %d finished", nodes, nodes); !strings.Contains(body, want) {
		t.Errorf("the runs page lacks %q", want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// BenchmarkLargeRuns measures, on a real SQLite store and HTTP listener,
// the Approvals page with 200 runs of 10,000 nodes waiting,
// GET /api/v1/runs?limit=200 over 200 running runs with 300,000 children
// in all, and the page of a run of 1,500 and of 10,000 nodes (its first 50
// nodes): the median of 3 requests each, their spread (slowest − fastest)
// and the size of the answer. The runs are stored directly, not through
// the API. `make bench` runs it once (-benchtime 1x).
func BenchmarkLargeRuns(b *testing.B) {
	e := setup(b)
	start := time.Now().UTC().Add(-time.Hour)
	t0 := time.Now()
	seedRuns(b, e.st, 200, 10_000, store.RunPendingApprove, start)
	running := seedRuns(b, e.st, 200, 1_500, store.RunRunning, start.Add(time.Minute))
	big := seedRuns(b, e.st, 1, 10_000, store.RunRunning, start.Add(2*time.Minute))
	b.Logf("seeded 200 pending runs of 10,000 nodes, 200 running runs with 300,000 children and a run of 10,000 nodes in %s",
		time.Since(t0).Round(time.Millisecond))
	appr := e.browser().signIn("appr")
	measure := func(name string, get func() (int, int)) {
		var ms []float64
		size := 0
		for range 3 {
			t := time.Now()
			status, n := get()
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
			if status != http.StatusOK {
				b.Fatalf("%s: %d", name, status)
			}
			size = max(size, n)
		}
		slices.Sort(ms)
		b.ReportMetric(ms[1], name+"_ms")
		b.ReportMetric(ms[2]-ms[0], name+"_spread_ms")
		b.ReportMetric(float64(size)/1024, name+"_kb")
	}
	b.ResetTimer()
	for range b.N {
		measure("approvals_200_runs_10000_nodes", func() (int, int) {
			status, _, body := appr.get("/ui/approvals")
			return status, len(body)
		})
		measure("run_list_200_runs_300k_children", func() (int, int) {
			status, body := e.getAs(b, "viewer", "/api/v1/runs?limit=200")
			return status, len(body)
		})
		// A run's page reads a page of its nodes and their children.
		measure("run_page_1500_nodes", func() (int, int) {
			status, _, body := appr.get("/ui/runs/" + running[0])
			return status, len(body)
		})
		measure("run_page_10000_nodes", func() (int, int) {
			status, _, body := appr.get("/ui/runs/" + big[0])
			return status, len(body)
		})
		// What run watch reads every second and run show once: the
		// counts and the nodes in flight, not every child.
		measure("run_api_10000_nodes", func() (int, int) {
			status, body := e.getAs(b, "viewer", "/api/v1/runs/"+big[0])
			return status, len(body)
		})
	}
}

// TestLargeRunsLiveRefreshesComeAtMostOncePerSecond: a page's live region
// refreshes once per round of notes on its stream, so events appended
// every 200 ms reach the stream in rounds at least a second apart, all of
// them, none lost.
func TestLargeRunsLiveRefreshesComeAtMostOncePerSecond(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream?type=run.*", nil)
	c := &http.Client{Jar: b.c.Jar} // no client timeout: the stream stays open
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	const events = 15
	arrived := make(chan time.Time, events)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id: ") {
				arrived <- time.Now()
			}
		}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := range events {
		<-tick.C
		if err := e.st.Update(ctx, func(tx store.Tx) error {
			return tx.AppendEvent(ctx, &store.Event{Type: store.EventRunStageStarted, Actor: "core", ClusterID: "prod",
				RunID: action.NewID(), Message: fmt.Sprintf("event %d", i)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var at []time.Time
	for len(at) < events {
		select {
		case a := <-arrived:
			at = append(at, a)
		case <-ctx.Done():
			t.Fatalf("%d of %d events reached the stream", len(at), events)
		}
	}
	// Notes of one round arrive together; between rounds, a second passes.
	rounds := 1
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		if gap < 100*time.Millisecond {
			continue
		}
		rounds++
		if gap < 900*time.Millisecond {
			t.Fatalf("notes %d and %d arrived %s apart: two rounds within a second", i, i+1, gap.Round(time.Millisecond))
		}
	}
	if rounds < 2 || rounds > 5 {
		t.Fatalf("%d events over 3 s came in %d rounds, want 2 to 5", events, rounds)
	}
}
