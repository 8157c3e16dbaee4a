package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCommittedDocsTablesAreMadeFromTheCommittedResults: every table of
// docs/performance.md is what `make docs` makes from bench/results.json,
// and each table the rows belong to is there.
func TestCommittedDocsTablesAreMadeFromTheCommittedResults(t *testing.T) {
	t.Parallel()
	docPath, resPath := filepath.Join("..", "..", "docs", "performance.md"), filepath.Join("..", "..", "bench", "results.json")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := readResults(resPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if name := tableOf(r.key); !strings.Contains(string(doc), "<!-- bench:table "+name+" -->") {
			t.Errorf("docs/performance.md has no table %q (for %s)", name, r.key)
		}
	}
	want, err := rewriteDocs(doc, res)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(doc) {
		t.Fatalf("docs/performance.md's tables are not the ones bench/results.json makes: run make docs\n%s", firstDiff(string(doc), string(want)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + al[i] + "\n  made:      " + bl[i]
		}
	}
	return "lengths differ"
}

// TestDocsTablesShowNullAsNotMeasuredAndKeepTheRest: a null figure (and its
// null reference) shows as "not measured", goals say met or MISSED, the
// text around the markers is kept, and what was between them is replaced.
func TestDocsTablesShowNullAsNotMeasuredAndKeepTheRest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := filepath.Join(dir, "results.json")
	if err := os.WriteFile(res, []byte(`{"notify_latency_p50_ms": null, "notify_latency_p99_ms": 1500,
		"notify_write_path_ratio_1": 0.9, "notify_write_path_ratio_spread_1": null}`), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(dir, "performance.md")
	if err := os.WriteFile(docs, []byte("# Before\n\n<!-- bench:table notify -->\n| old | table |\n<!-- /bench:table -->\n\nAfter.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDocs(docs, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Before\n\n<!-- bench:table notify -->\n" +
		"| figure | value | reference (same run) | goal |\n|---|---|---|---|\n" +
		"| notification: event committed → delivered p50 (ms), 100 events/s | not measured |  |  |\n" +
		"| notification: event committed → delivered p99 (ms), 100 events/s | 1500 |  | < 1000: MISSED |\n" +
		"| outbox cost: event writes/s, one destination ÷ none (worker stopped): median of 3 | 0.9 | not measured | >= 0.8: met |\n" +
		"| outbox cost: event writes/s, three destinations ÷ none (worker stopped): median of 3 | not measured | not measured | >= 0.8 |\n" +
		"| … with the worker posting each to a local receiver on the same cores, one destination | not measured | not measured |  |\n" +
		"| … with the worker posting each to local receivers on the same cores, three destinations | not measured | not measured |  |\n" +
		"| event writes/s without notify | not measured |  |  |\n" +
		"<!-- /bench:table -->\n\nAfter.\n"
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
}

// TestDocsRefuseAnUnknownTableAnOpenMarkerAndBadResults: nothing is written
// when the file names a table no figure belongs to, leaves a marker open,
// or the results are not numbers.
func TestDocsRefuseAnUnknownTableAnOpenMarkerAndBadResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"notify_latency_p99_ms": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"notify_latency_p99_ms": "fast"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ doc, res, want string }{
		"unknown table": {"<!-- bench:table nosuch -->\n<!-- /bench:table -->\n", good, `table "nosuch"`},
		"open marker":   {"<!-- bench:table notify -->\n| x |\n", good, "has no <!-- /bench:table -->"},
		"bad results":   {"<!-- bench:table notify -->\n<!-- /bench:table -->\n", bad, "not an object of numbers"},
	} {
		docs := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".md")
		if err := os.WriteFile(docs, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		err := writeDocs(docs, c.res)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", name, err, c.want)
		}
		if b, _ := os.ReadFile(docs); string(b) != c.doc {
			t.Errorf("%s: the file changed to %q", name, b)
		}
	}
}

// FuzzRewriteDocs: whatever the documentation file and the results, the
// rewrite never panics, keeps the text before the first table, and a
// second rewrite changes nothing.
func FuzzRewriteDocs(f *testing.F) {
	f.Add("# x\n<!-- bench:table notify -->\nold\n<!-- /bench:table -->\ntail\n", `{"notify_latency_p99_ms": 3}`)
	f.Add("<!-- bench:table core -->\n", `{}`)
	f.Add("<!-- bench:table runs -->\r\n<!-- /bench:table -->", `{"run_waves_ratio": null}`)
	f.Add("<!-- bench:table Core -->\n<!-- /bench:table -->\n", `[1]`)
	f.Fuzz(func(t *testing.T, doc, results string) {
		var raw map[string]*float64
		res := map[string]float64{}
		if json.Unmarshal([]byte(results), &raw) == nil {
			for k, v := range raw {
				if v != nil {
					res[k] = *v
				}
			}
		}
		once, err := rewriteDocs([]byte(doc), res)
		if err != nil {
			return
		}
		twice, err := rewriteDocs(once, res)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("a second rewrite changed it (%v):\n%q\n%q", err, once, twice)
		}
		if head, _, _ := strings.Cut(doc, "<!-- bench:table"); !strings.HasPrefix(string(once), head) {
			t.Fatalf("the text before the first table changed:\n%q\n%q", doc, once)
		}
	})
}
