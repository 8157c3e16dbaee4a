package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// vmRSSOf reads a running process's resident set size, in bytes, from
// /proc/PID/status.
func vmRSSOf(t *testing.T, p *proc) int64 { return procStatusBytes(t, p, "VmRSS") }

// vmHWMOf reads a running process's peak resident set size so far (its
// high-water mark), in bytes, from /proc/PID/status.
func vmHWMOf(t *testing.T, p *proc) int64 { return procStatusBytes(t, p, "VmHWM") }

// procStatusBytes reads field, in kB, of a running process's
// /proc/PID/status, in bytes.
func procStatusBytes(t *testing.T, p *proc, field string) int64 {
	t.Helper()
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc on this system: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s line %q: %v", field, l, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTicksOf reads a running process's user and system CPU time, in clock
// ticks, from /proc/PID/stat.
func cpuTicksOf(t *testing.T, p *proc) int64 {
	t.Helper()
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc on this system: %v", err)
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after it (utime and stime are fields 14 and 15).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return utime + stime
}

// yamlAliasBomb is one anchored string of size bytes aliased n times in a
// stage's args: a small document that would expand to n × size bytes.
func yamlAliasBomb(name string, size, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      seed: &s %q\n", name, strings.Repeat("x", size))
	for i := range n {
		fmt.Fprintf(&b, "      k%d: *s\n", i)
	}
	return b.String()
}

// Issue 17, item 1, against a real core: YAML alias bombs sent to plan and
// apply are refused with a 400 naming the anchor, the core's resident memory
// grows by less than 20 MB over them (one anchored 50 KB string aliased 2,000
// times took it from 33 MB to 362 MB before), and they and an aliased
// template cost it under 2 s of CPU (that template once cost 10 s).
func TestYAMLAliasBombIsRefusedByARealCore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.yaml")
	core := startOnFreePort(t, dir, "core", func(port int) []string {
		cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\nclusters:\n  - id: e2e\n    nodes: []\n", filepath.Join(dir, "data"), port)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"core", "--config", path}
	})
	admin, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string, body any) (int, []byte) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+core.Addr()+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(admin)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	// A plan of a small good document first, so that what the first request
	// of a kind costs is not counted: it parses, and the cluster (without
	// nodes here) cannot take it.
	good := "name: bomb\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, args: {v: 1}}\n"
	if st, b := post("/api/v1/playbooks/bomb/plan", wire.PlanRequest{ClusterID: "e2e", Document: good}); st != http.StatusUnprocessableEntity {
		t.Fatalf("plan of a good document: %d %s", st, b)
	}
	before, cpuBefore := vmRSSOf(t, core), cpuTicksOf(t, core)

	// The published bomb (58 KB), then four at once of 106 KB, to plan and
	// to apply.
	bomb := yamlAliasBomb("bomb", 50<<10, 2000)
	if st, b := post("/api/v1/playbooks/bomb/plan", wire.PlanRequest{ClusterID: "e2e", Document: bomb}); st != http.StatusBadRequest ||
		!strings.Contains(string(b), "anchors (\\u0026s) are not allowed") && !strings.Contains(string(b), "anchors (&s) are not allowed") {
		t.Fatalf("plan of a %d-byte alias bomb: %d %s", len(bomb), st, b)
	}
	single := vmRSSOf(t, core) - before
	t.Logf("core RSS after the %d-byte bomb: growth %.1f MB", len(bomb), float64(single)/(1<<20))
	if single >= 20<<20 {
		t.Fatalf("one alias bomb grew the core's RSS by %.1f MB, want under 20 MB", float64(single)/(1<<20))
	}
	big := yamlAliasBomb("bomb", 100<<10, 2000)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			path, body := "/api/v1/playbooks/bomb/plan", any(wire.PlanRequest{ClusterID: "e2e", Document: big})
			if i%2 == 1 {
				path, body = "/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: big}
			}
			if st, b := post(path, body); st != http.StatusBadRequest {
				t.Errorf("%s with a %d-byte alias bomb: %d %.200s", path, len(big), st, b)
			}
		})
	}
	wg.Wait()
	after := vmRSSOf(t, core)
	// A template aliased 2,000 times (26 KB) once cost 10 s of CPU.
	var tpl strings.Builder
	tpl.WriteString("name: bomb\nparams: [{name: p, type: string, default: v}]\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      t: &t '" +
		strings.Repeat("{{ .p }}", 1000) + "'\n")
	for i := range 2000 {
		fmt.Fprintf(&tpl, "      k%d: *t\n", i)
	}
	if st, b := post("/api/v1/playbooks/bomb/plan", wire.PlanRequest{ClusterID: "e2e", Document: tpl.String()}); st != http.StatusBadRequest {
		t.Fatalf("plan of an aliased template: %d %.200s", st, b)
	}
	cpu := cpuTicksOf(t, core) - cpuBefore
	growth := after - before
	t.Logf("core RSS %d MB before, %d MB after the bombs: growth %.1f MB", before>>20, after>>20, float64(growth)/(1<<20))
	t.Logf("core CPU for all the bombs: %d ticks", cpu)
	if cpu > 200 { // clock ticks, 100 a second on Linux
		t.Errorf("the bombs cost the core %d ticks of CPU, want under 2 s", cpu)
	}
	// Four requests at once hold four bodies: under the race detector,
	// whose shadow memory doubles the heap, they are allowed twice as much.
	limit := int64(20 << 20)
	if raceEnabled {
		limit *= 2
	}
	if growth >= limit {
		t.Fatalf("the core's RSS grew by %.1f MB (from %d to %d bytes), want under %d MB", float64(growth)/(1<<20), before, after, limit>>20)
	}
}
