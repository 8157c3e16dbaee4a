package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestLargeRunsKeepApprovalsAndRunListsSmall runs against a real core with
// 2,000 static nodes and 60 runs over all of them waiting for approval:
// the Approvals page shows a page of runs with each stage's first nodes
// and how many it has, and GET /api/v1/runs lists them all without their
// node lists, both far smaller than the runs.
func TestLargeRunsKeepApprovalsAndRunListsSmall(t *testing.T) {
	t.Parallel()
	const nodes, runs = 2000, 60
	dir := t.TempDir()
	var list strings.Builder
	for i := range nodes {
		// Nothing listens there: the nodes stay down, which runs allow.
		fmt.Fprintf(&list, "      - {id: node-%04d.prod.example.com, addr: \"127.0.0.1:9\"}\n", i)
	}
	core := startOnFreePort(t, dir, "core", func(port int) []string {
		path := filepath.Join(dir, "core.yaml")
		cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\nclusters:\n  - id: big\n    nodes:\n%sorchestrate:\n  interval: 1h\n  agent_timeout: 1s\n",
			filepath.Join(dir, "data"), port, list.String())
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"core", "--config", path}
	})
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + core.Addr()
	hc := &http.Client{Timeout: 30 * time.Second}
	admin := client.NewCore(base, strings.TrimSpace(string(secret)), hc)
	op, err := admin.CreateToken(ctxT(t), "olga", []string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	appr, err := admin.CreateToken(ctxT(t), "abe", []string{"approver"})
	if err != nil {
		t.Fatal(err)
	}
	olga := client.NewCore(base, op.Token, hc)
	for range runs {
		r, err := olga.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "big", Stages: []wire.StageSpec{{
			Name: "main", Kind: "example.com/os/reboot", Target: wire.Target{All: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != "PENDING_APPROVE" || r.Stages[0].NodeCount != nodes {
			t.Fatalf("run %s: %s on %d nodes, want PENDING_APPROVE on %d", r.ID, r.State, r.Stages[0].NodeCount, nodes)
		}
	}

	// The API's list: every run, none with its node list.
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/runs?limit=200", nil)
	req.Header.Set("Authorization", "Bearer "+appr.Token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(raw) > 256<<10 {
		t.Fatalf("GET /api/v1/runs?limit=200: %d, %d KB; want 200 and at most 256 KB", resp.StatusCode, len(raw)>>10)
	}
	var rl wire.RunList
	if err := json.Unmarshal(raw, &rl); err != nil {
		t.Fatal(err)
	}
	if len(rl.Runs) != runs {
		t.Fatalf("the list has %d runs, want %d", len(rl.Runs), runs)
	}
	for _, r := range rl.Runs {
		if st := r.Stages[0]; st.NodeCount != nodes || len(st.Nodes) >= nodes || st.Counts["PENDING"] != nodes {
			t.Fatalf("run %s in the list: %d nodes listed of %d, counts %v", r.ID, len(st.Nodes), st.NodeCount, st.Counts)
		}
	}

	// The Approvals page, signed in through the sign-in form.
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := b.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, login := get("/ui/login")
	m := csrfField.FindStringSubmatch(login)
	if m == nil {
		t.Fatal("the sign-in page has no CSRF field")
	}
	resp, err = b.PostForm(base+"/ui/login", url.Values{"token": {appr.Token}, "csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	status, page := get("/ui/approvals")
	if status != http.StatusOK || len(page) > 512<<10 {
		t.Fatalf("approvals: %d, %d KB; want 200 and at most 512 KB", status, len(page)>>10)
	}
	cards := strings.Count(page, `class="card approval run`)
	if cards == 0 || cards >= runs || !strings.Contains(page, `id="runs-next"`) ||
		!strings.Contains(page, fmt.Sprintf("%d: node-0000.prod.example.com", nodes)) {
		t.Fatalf("approvals shows %d of %d runs, a next page: %v, the first nodes and their count: %v", cards, runs,
			strings.Contains(page, `id="runs-next"`), strings.Contains(page, fmt.Sprintf("%d: node-0000", nodes)))
	}
}
