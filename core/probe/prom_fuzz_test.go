package probe

import (
	"testing"

	"github.com/musterhq/muster/core/runs"
)

// FuzzJudgeProm: whatever another server answers a Prometheus query,
// judging it never panics, passes only on samples that meet the
// expectation, and keeps a bounded value. The seeds run in make test.
func FuzzJudgeProm(f *testing.F) {
	for _, s := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"n1"},"value":[1,"0.001"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]},{"value":[2,"+Inf"]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1,"0.5"]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,2]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":"x"}}`,
		`{"status":"error","error":"parse error at char 3"}`,
		`<html>internal page</html>`,
		``, `null`, `{"data":null}`,
	} {
		f.Add(200, []byte(s))
	}
	expect, err := runs.ParseExpect("< 0.01")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		value, pass, why := judgeProm(status, body, expect)
		if len(value) > maxShown+len("…") {
			t.Fatalf("a value of %d bytes kept", len(value))
		}
		if why == "" {
			t.Fatal("a verdict without words")
		}
		if pass && value == "" {
			t.Fatal("passed without a value seen")
		}
	})
}
