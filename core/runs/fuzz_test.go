package runs

import (
	"encoding/json"
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
		names := map[string]bool{}
		for _, st := range req.Stages {
			if st.Name == "" || names[st.Name] || st.MaxConcurrency == nil || st.MaxConcurrency.N < 1 ||
				st.MaxErrors == nil || st.DependsOn == nil {
				t.Fatalf("accepted a stage the planner cannot run: %+v", st)
			}
			names[st.Name] = true
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
