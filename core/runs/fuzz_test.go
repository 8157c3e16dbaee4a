package runs

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/wire"
)

// FuzzCheck feeds request bodies of POST /api/v1/runs through the strict
// decoder and Check: nothing panics, and what is accepted is a run the
// planner can execute (named stages, known dependencies, no cycle, limits
// set).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"cluster_id":"c","stages":[{"kind":"a.io/x","target":{"all":true}}]}`,
		`{"cluster_id":"c","stages":[{"name":"a","kind":"a.io/x","target":{"nodes":["n1"]},"max_concurrency":"10%","max_errors":2},{"name":"b","kind":"a.io/y","target":{"labels":{"role":"db"}},"depends_on":["a"]}]}`,
		`{"cluster_id":"c","stages":[{"name":"a","kind":"a.io/x","target":{"all":true},"depends_on":["b"]},{"name":"b","kind":"a.io/x","target":{"all":true}}]}`,
		`{"cluster_id":"c","stages":[{"kind":"a.io/x","target":{},"on_failure":"pause"}]}`,
		`{"cluster_id":"c","stages":[{"kind":"a.io/x","target":{"all":true},"max_concurrency":"101%"}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"max_concurrency":1,"on_failure":"continue","canary":1,"soak_s":30,"unavailable":"wait","unavailable_timeout_s":60,` +
			`"steps":[{"name":"drain","kind":"a.io/drain"},{"name":"up","kind":"a.io/up","args":{"v":"{{ .params.v }}"},"timeout_s":60},` +
			`{"name":"verify","kind":"a.io/check","retry":{"attempts":3,"delay_s":5,"backoff":2,"max_delay_s":60},"when":"{{ eq .steps.up.state \"DONE\" }}"},` +
			`{"name":"undrain","kind":"a.io/undrain","when":"always"}],` +
			`"rollback":[{"name":"down","kind":"a.io/up","args":{"v":"{{ .steps.up.outputs.previous }}"}}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"a","kind":"a.io/x","args":{"v":"{{ .steps.b.outputs.x }}"}},{"name":"b","kind":"a.io/x"}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"a","kind":"a.io/x","retry":{"attempts":21}}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"a","kind":"a.io/x","when":"{{ .steps }}"}]}]}`,
		`{"cluster_id":"c","lock":"db","stages":[{"kind":"a.io/x","target":{"all":true},"lock":{"name":"lb","scope":"global"}}]}`,
		`{"cluster_id":"c","lock":{"name":"db","scope":"galaxy"},"stages":[{"kind":"a.io/x","target":{"all":true}}]}`,
		`{"cluster_id":"c","lock":{"name":"db","other":1},"stages":[{"kind":"a.io/x","target":{"all":true}}]}`,
		`{"cluster_id":"c","lock":7,"stages":[{"kind":"a.io/x","target":{"all":true},"lock":""}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"canary":1,"auto_promote_after_s":30,"abort_on":["ok"],` +
			`"steps":[{"name":"lb","call":{"http":{"method":"POST","url":"https://lb/{{ .node.id }}","headers":{"Authorization":"Bearer {{ secret \"t\" }}"}}}},` +
			`{"name":"up","kind":"a.io/up"},{"name":"ok","gate":{"prometheus":{"url":"http://p:9090","query":"err{node=\"{{ .node.id }}\"}","expect":"< 0.01"}},"soak_s":10,"retry":{"attempts":3}}],` +
			`"rollback":[{"name":"down","kind":"a.io/up"}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"g","gate":{"http":{"url":"https://x/health","expect_status":204,"body_contains":"ok"}}}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"g","kind":"core/gate","args":{"http":{"url":"https://x"},"prometheus":{}}}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"steps":[{"name":"g","gate":{},"call":{}}]}]}`,
		`{"cluster_id":"c","stages":[{"name":"u","target":{"all":true},"auto_promote_after_s":5,"steps":[{"name":"g","kind":"a.io/x","soak_s":3}]}]}`,
		`{"stages":null}`, `[]`, `{"cluster_id":"c","stages":[{"kind":"a.io/x","target":{"all":true},"depends_on":[]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req wire.CreateRunRequest
		if err := jsonbody.Decode(body, &req); err != nil {
			return
		}
		if err := Check(&req); err != nil {
			return
		}
		locks := []*wire.Lock{req.Lock}
		for _, st := range req.Stages {
			locks = append(locks, st.Lock)
		}
		for _, l := range locks {
			if l != nil && (l.Name == "" || (l.Scope != wire.LockCluster && l.Scope != wire.LockGlobal)) {
				t.Fatalf("accepted a lock no run can take: %+v", *l)
			}
		}
		names := map[string]bool{}
		for _, st := range req.Stages {
			if st.Name == "" || names[st.Name] || st.MaxConcurrency == nil || st.MaxConcurrency.N < 1 ||
				st.MaxErrors == nil || st.DependsOn == nil {
				t.Fatalf("accepted a stage the planner cannot run: %+v", st)
			}
			names[st.Name] = true
			if len(st.Steps)+len(st.Rollback) > MaxSteps || (len(st.Steps) > 0 && st.Kind != "") {
				t.Fatalf("accepted a procedure the planner cannot run: %+v", st)
			}
			steps := map[string]bool{}
			for _, sp := range append(slices.Clone(st.Steps), st.Rollback...) {
				if sp.Name == "" || steps[sp.Name] || (sp.Retry != nil && (sp.Retry.Attempts < 1 || sp.Retry.Attempts > MaxAttempts ||
					sp.Retry.MaxDelayS > MaxRetryDelayS)) {
					t.Fatalf("accepted a step the planner cannot run: %+v", sp)
				}
				steps[sp.Name] = true
				if sp.Gate != nil || sp.Call != nil {
					t.Fatalf("accepted a gate or a call not in its stored form: %+v", sp)
				}
				if sp.Kind == KindGate {
					if _, err := DecodeGate(sp.Args); err != nil {
						t.Fatalf("accepted a gate the core cannot evaluate: %v", err)
					}
				}
				if sp.Kind == KindCall {
					if _, err := DecodeCall(sp.Args); err != nil {
						t.Fatalf("accepted a call the core cannot send: %v", err)
					}
				}
			}
			for _, g := range st.AbortOn {
				if !slices.ContainsFunc(st.Steps, func(sp wire.StepSpec) bool { return sp.Name == g && sp.Kind == KindGate }) {
					t.Fatalf("accepted abort_on %q, not a gate", g)
				}
			}
		}
		for _, st := range req.Stages {
			for _, d := range st.DependsOn {
				if !names[d] {
					t.Fatalf("accepted a dependency on an unknown stage %q", d)
				}
			}
		}
		if cycle(req.Stages) != nil {
			t.Fatal("accepted a cycle")
		}
		if _, err := json.Marshal(req); err != nil {
			t.Fatal(err)
		}
	})
}
