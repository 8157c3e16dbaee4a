package ui

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
)

// FuzzRunBuilder: the New run builder's decoder keeps only text without
// control characters (but the args' newlines and tabs), within bounds and
// within the row counts a run allows; and what buildRunDocument accepts is
// a document within bounds that the playbook parser reads back with as many
// stages (unless an arg is a template, which only the plan can check).
func FuzzRunBuilder(f *testing.F) {
	for _, s := range []string{
		"run_name=adhoc&stages=2&s0.name=a&s0.target=role%3Ddb&s0.p0.kind=muster.io%2Fdebug.sleep&s0.p0.args=seconds%3D1" +
			"&s1.name=b&s1.target=all&s1.max_concurrency=50%25&s1.canary=1&s1.steps=2&s1.p0.kind=gate&s1.p0.args=%7B%22http%22%3A%7B%22url%22%3A%22http%3A%2F%2Fx%2F%22%7D%7D" +
			"&s1.p1.name=up&s1.p1.kind=muster.io%2Fdebug.sleep&s1.p1.args=%7B%22seconds%22%3A2%7D",
		"run_name=adhoc&s0.name=a&s0.target=nodes%3Ddb-1&s0.p0.kind=muster.io%2Fdebug.sleep&s0.p0.args=seconds%3D9",
		"run_name=adhoc&stages=99999&do=add_stage", "run_name=adhoc&s0.steps=-1&do=add_step.0", "do=add_step.7",
		"run_name=x&s0.name=a%1b&s0.target=role%3D%3Cb%3E&s0.p0.kind=example.com%2Fnope&s0.p0.args=%ff",
		"run_name=adhoc&s0.name=a&s0.target=all&s0.p0.kind=muster.io%2Fdebug.sleep&s0.p0.args=a%3D%7B%7B+.x+%7D%7D",
		"run_name=adhoc&s0.name=a&s0.target=all&s0.p0.kind=muster.io%2Fdebug.sleep&s0.p0.args=%5B1%5D",
		"run_name=adhoc&s0.name=a&s0.target=all&s0.p0.kind=muster.io%2Fdebug.sleep&s0.p0.args=a%3D1%0Aa%3D2",
		"run_name=adhoc&s0.name=a&s0.target=all&s0.p0.name=x&s0.p0.kind=gate&s0.steps=2&s0.p1.name=x&s0.p1.kind=gate",
	} {
		f.Add(s)
	}
	nodes := []store.Node{
		{ID: "db-1", Labels: map[string]string{"role": "db"}, Kinds: []string{schemaKind}},
		{ID: "db-2", Labels: map[string]string{"role": "db"}, Kinds: []string{schemaKind}, ArgsSchemas: map[string]json.RawMessage{
			schemaKind: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"integer","maximum":5}}}`)}},
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		b, _ := decodeRunBuilder(v)
		if len(b.Stages) == 0 || len(b.Stages) > runs.MaxStages || hasControl(b.Name) {
			t.Fatalf("decodeRunBuilder(%q): %d stages, name %q", body, len(b.Stages), b.Name)
		}
		for _, st := range b.Stages {
			for _, s := range []string{st.Name, st.Target, st.MaxConcurrency, st.MaxErrors, st.Canary, st.AutoPromote} {
				if hasControl(s) {
					t.Fatalf("decodeRunBuilder(%q) keeps %q to show", body, s)
				}
			}
			if len(st.Steps) == 0 || len(st.Steps) > runs.MaxSteps {
				t.Fatalf("decodeRunBuilder(%q): a stage of %d steps", body, len(st.Steps))
			}
			for _, sp := range st.Steps {
				if hasControl(sp.Name) || hasControl(sp.Kind) || len(sp.Args) > maxArgsField || !utf8.ValidString(sp.Args) {
					t.Fatalf("decodeRunBuilder(%q) keeps step %+v", body, sp)
				}
			}
		}
		doc, errs := buildRunDocument(b, nodes)
		if len(errs) > 0 {
			if doc != "" {
				t.Fatalf("buildRunDocument(%q) refused %v but gave a document", body, errs)
			}
			return
		}
		if len(doc) > playbook.MaxSize {
			t.Fatalf("buildRunDocument(%q): %d bytes", body, len(doc))
		}
		pb, err := playbook.Parse([]byte(doc))
		if err != nil {
			if !strings.Contains(doc, "{{") {
				t.Fatalf("buildRunDocument(%q) gave a document the parser refuses: %v\n%s", body, err, doc)
			}
			return
		}
		n := 0
		for i := range b.Stages {
			if !b.Stages[i].blank() {
				n++
			}
		}
		if len(pb.Stages) != n {
			t.Fatalf("buildRunDocument(%q): %d stages read back, %d typed\n%s", body, len(pb.Stages), n, doc)
		}
	})
}

// BenchmarkRunBuilderLargeCluster: the builder over a 20,000-node cluster,
// 50 stages on every node, each of 4 steps of one kind: its work is a pass
// over the nodes per stage (a set of the target's ids, the schemas of a
// kind found once a stage), not the nodes times the picked ones.
func BenchmarkRunBuilderLargeCluster(b *testing.B) {
	nodes := make([]store.Node, 20000)
	for i := range nodes {
		nodes[i] = store.Node{ID: "n-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i), Kinds: []string{schemaKind},
			ArgsSchemas: map[string]json.RawMessage{schemaKind: json.RawMessage(`{"type":"object"}`)}}
	}
	rb := runBuilder{Name: "adhoc"}
	for i := 0; i < runs.MaxStages; i++ {
		st := builderStage{Name: "s" + strconv.Itoa(i), Target: "all"}
		for j := 0; j < 4; j++ {
			st.Steps = append(st.Steps, builderStep{Name: "p" + strconv.Itoa(j), Kind: schemaKind, Args: "seconds=1"})
		}
		rb.Stages = append(rb.Stages, st)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, errs := buildRunDocument(rb, nodes); len(errs) > 0 {
			b.Fatalf("refused: %v", errs)
		}
	}
}
