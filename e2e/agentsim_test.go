package e2e

// The agent simulator of the large-fleet benchmarks (bench/agentsim) is
// held to the real agent: the same requests, in the order a core's sync
// sends them, get answers of the same status and the same shape (keys and
// JSON types, and the fields the core decides on) from a muster-agent
// process and from a node of the simulator.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// startAgentSim builds bench/agentsim and starts it with count nodes of
// cluster "e2e" named n1…; it returns their addresses. The simulator stops
// when the test ends (its input closes).
func startAgentSim(t *testing.T, count int, args ...string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentsim")
	if out, err := exec.Command("go", "build", "-o", bin, "../bench/agentsim").CombinedOutput(); err != nil {
		t.Fatalf("build agentsim: %v\n%s", err, out)
	}
	// Addresses of its own in 127.0.0.0/8, away from other tests' ports.
	cmd := exec.Command(bin, append([]string{"-cluster", "e2e", "-prefix", "n", "-count", fmt.Sprint(count),
		"-ip", fmt.Sprintf("127.%d.%d.1", 100+time.Now().Nanosecond()%100, time.Now().Nanosecond()/100%250)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("agentsim: %v\n%s", err, stderr.String())
		}
	})
	sc := bufio.NewScanner(out)
	var addrs []string
	for sc.Scan() && sc.Text() != "ready" {
		_, addr, _ := strings.Cut(sc.Text(), " ")
		addrs = append(addrs, addr)
	}
	if len(addrs) != count {
		t.Fatalf("agentsim started %d nodes, want %d\n%s", len(addrs), count, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return addrs
}

// exchange is one request of the sequence and what came back.
type exchange struct {
	status int
	body   any // the decoded JSON answer (nil when empty)
}

// apiCaller sends requests to one agent API and decodes the answers.
type apiCaller struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (c *apiCaller) do(method, path, contentType, body string) exchange {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	ex := exchange{status: resp.StatusCode}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &ex.body); err != nil {
			c.t.Fatalf("%s %s: %d with a body that is not JSON: %q", method, path, resp.StatusCode, raw)
		}
	}
	return ex
}

// shape is a JSON value with every leaf replaced by its type, and the
// values of decisive (the fields the core decides on) kept.
func shape(v any, decisive map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if decisive[k] {
				out[k] = e
				continue
			}
			out[k] = shape(e, decisive)
		}
		return out
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return []any{shape(x[0], decisive)}
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// The fields whose values must agree, beside the shape: what the core's
// sync decides on.
var decisive = map[string]bool{
	"state": true, "state_reason": true, "code": true, "node_id": true, "cluster_id": true,
	"kinds": true, "queue": true, "push_fields": true, "more": true, "kind": true, "origin": true,
	"timeout_s": true, "run_id": true, "wave": true, "attempt": true, "step": true, "stage": true,
}

func TestAgentSimAnswersAsAgent(t *testing.T) {
	t.Parallel()
	agentP, _, _ := agentProcOf(t, agentBinary, nil, t.TempDir(), "n1", "")
	simAddr := startAgentSim(t, 1, "-delay", "0s")[0]
	hc := &http.Client{Timeout: 40 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	callers := map[string]*apiCaller{
		"agent":    {t: t, base: "http://" + agentP.Addr(), hc: hc},
		"agentsim": {t: t, base: "http://" + simAddr, hc: hc},
	}
	const js = "application/json"
	ping, sleep := action.NewID(), action.NewID()
	type step struct {
		name                   string
		method, path, ct, body string
		waitState, waitFor     string // before the request: wait until this action has this state
		onlyIfAgentServes      bool
	}
	steps := []step{
		{name: "health", method: "GET", path: "/api/v1/health"},
		{name: "info", method: "GET", path: "/api/v1/info"},
		{name: "change counter", method: "GET", path: "/api/v1/changes", onlyIfAgentServes: true},
		{name: "changes, empty", method: "GET", path: "/api/v1/actions?since=0&limit=500"},
		{name: "push", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + ping + `","kind":"muster.io/debug.ping","origin":"core","requester":"alice","approved_by":"bob","cluster_id":"e2e","node_id":"n1","run_id":"` + action.NewID() + `","stage":"main","wave":1,"attempt":1}`},
		{name: "push again", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + ping + `","kind":"muster.io/debug.ping","origin":"core","requester":"alice","approved_by":"bob","cluster_id":"e2e","node_id":"n1"}`, waitFor: ping, waitState: "DONE"},
		{name: "push, same id other kind", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + ping + `","kind":"muster.io/debug.fail"}`},
		{name: "push, unknown kind", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + action.NewID() + `","kind":"example.com/none"}`},
		{name: "push, bad args", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + action.NewID() + `","kind":"muster.io/debug.sleep","args":{}}`},
		{name: "push, other node", method: "POST", path: "/api/v1/actions", ct: js, body: `{"kind":"muster.io/debug.ping","node_id":"n2"}`},
		{name: "push, not JSON", method: "POST", path: "/api/v1/actions", ct: js, body: `{"kind":`},
		{name: "push, no content type", method: "POST", path: "/api/v1/actions", body: `{"kind":"muster.io/debug.ping"}`},
		{name: "show", method: "GET", path: "/api/v1/actions/" + ping},
		{name: "show, unknown", method: "GET", path: "/api/v1/actions/" + action.NewID()},
		{name: "changes", method: "GET", path: "/api/v1/actions?since=0&limit=500"},
		{name: "changes, a page", method: "GET", path: "/api/v1/actions?since=0&limit=1"},
		{name: "changes, bad cursor", method: "GET", path: "/api/v1/actions?since=-1"},
		{name: "ack", method: "POST", path: "/api/v1/actions/ack", ct: js, body: `{"cursor":1}`},
		{name: "cancel, final", method: "POST", path: "/api/v1/actions/" + ping + "/cancel", ct: js},
		{name: "cancel, unknown", method: "POST", path: "/api/v1/actions/" + action.NewID() + "/cancel", ct: js},
		{name: "push a sleep", method: "POST", path: "/api/v1/actions", ct: js, body: `{"id":"` + sleep + `","kind":"muster.io/debug.sleep","args":{"seconds":30},"origin":"core"}`},
		{name: "cancel, running", method: "POST", path: "/api/v1/actions/" + sleep + "/cancel", ct: js, waitFor: sleep, waitState: "RUNNING"},
		{name: "show, cancelled", method: "GET", path: "/api/v1/actions/" + sleep, waitFor: sleep, waitState: "CANCELLED"},
		{name: "info, after", method: "GET", path: "/api/v1/info"},
		{name: "change counter, after", method: "GET", path: "/api/v1/changes", onlyIfAgentServes: true},
		{name: "changes, waiting", method: "GET", path: "/api/v1/actions?since=1000&wait=100ms"},
	}
	for _, s := range steps {
		got := map[string]exchange{}
		for _, who := range []string{"agent", "agentsim"} {
			c := callers[who]
			if s.waitFor != "" {
				testwait.Within(t, 20*time.Second, who+": "+s.waitFor+" "+s.waitState, func() bool {
					ex := c.do("GET", "/api/v1/actions/"+s.waitFor, "", "")
					m, _ := ex.body.(map[string]any)
					return ex.status == http.StatusOK && m["state"] == s.waitState
				})
			}
			got[who] = c.do(s.method, s.path, s.ct, s.body)
		}
		a, b := got["agent"], got["agentsim"]
		if s.onlyIfAgentServes && a.status == http.StatusNotFound {
			t.Logf("%s: the agent does not serve %s yet; the simulator answered %d", s.name, s.path, b.status)
			continue
		}
		if a.status != b.status {
			t.Errorf("%s: %s %s: the agent answered %d, the simulator %d (%v)", s.name, s.method, s.path, a.status, b.status, b.body)
			continue
		}
		as, bs := shape(a.body, decisive), shape(b.body, decisive)
		if d := diffShapes("", as, bs); len(d) > 0 {
			t.Errorf("%s: %s %s: answers differ:\n  %s", s.name, s.method, s.path, strings.Join(d, "\n  "))
		}
	}
}

// diffShapes lists where two shapes differ, by path.
func diffShapes(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, fmt.Sprintf("%s.%s: only the simulator has it (%v)", path, k, bv))
			case !bin:
				out = append(out, fmt.Sprintf("%s.%s: only the agent has it (%v)", path, k, av))
			default:
				out = append(out, diffShapes(path+"."+k, av, bv)...)
			}
		}
		return out
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffShapes(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return []string{fmt.Sprintf("%s: agent %v, simulator %v", path, a, b)}
	}
	return nil
}
