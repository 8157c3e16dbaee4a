package approval

import (
	"context"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzPolicyYAML decodes an approval section as core.yaml gives it: the
// decoding either fails, or yields a policy whose Validate names one field
// path per problem, and whose levels of any kind and cluster tally
// without a panic. The seeds run in go test.
func FuzzPolicyYAML(f *testing.F) {
	for _, s := range []string{
		"default: required\nttl: 1h\nrules: []\n",
		"default: required\nttl: 1h\nrules:\n  - cluster: 'prod-*'\n    kind: '*'\n    levels:\n      - teams: [db]\n        min: 1\n      - teams: [sre]\n",
		"default: none\nttl: 1h\nrules:\n  - {kind: 'db/**', levels: [{persons: [alice, bob], min: 2}]}\n",
		"rules:\n  - {kind: '*', approval: none, levels: [{teams: [db]}]}\n",
		"rules:\n  - levels: [{}, {min: -3}, {teams: ['a b'], persons: ['']}]\n",
		"rules:\n  - levels: [{teams: [db]}, {teams: [DB]}]\n",
		"rules:\n  - levels: {teams: db}\n",
		"rules:\n  - levels: [{teams: [db], min: 99999999999999999999}]\n",
		"rules: [{levels: [{persons: [\"a\\tb\"]}]}]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		p := DefaultPolicy()
		if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
			return
		}
		for _, e := range p.Validate() {
			if !strings.HasPrefix(e.Field, "approval.") || strings.Contains(e.Problem, "\n") {
				t.Fatalf("error %q: %q", e.Field, e.Problem)
			}
		}
		for _, kinds := range [][]string{nil, {"db/x"}, {"a", "b"}} {
			ls := p.Levels(kinds, "prod-db-1")
			w := Work{Levels: ls, Digest: "d", Requester: "r",
				Approvals: []Recorded{{Person: "dana", Level: "x", Digest: "d"}}}
			tl, err := Count(context.Background(), dir, w)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tl.Levels {
				_ = tl.Line(i)
			}
			_, _ = Place(w, tl, "pat", []string{"db", "sre"})
		}
	})
}
