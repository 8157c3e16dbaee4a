package runs

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
)

// TestStepRenderStopsAtItsBound: a render that would pass its bound stops
// there, having built no more than the bound, rather than building the
// whole output and measuring it afterwards. The template below would
// render 64 MiB; the core may allocate a few times the bound, never the
// output.
func TestStepRenderStopsAtItsBound(t *testing.T) {
	// Not parallel: it reads the process's allocation counter.
	big := strings.Repeat("x", 1<<20)
	c := newNodeContext(map[string]any{"big": big}, "n1", nil, nil)
	sp := &store.RunStep{Name: "s", Args: json.RawMessage(`{"v":"` + strings.Repeat("{{ .params.big }}", 64) + `"}`)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := newStepTemplates().renderArgs(sp, c)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("rendered 64 MiB of args")
	}
	const margin = 16 << 20 // a quarter of the output: far above the bound, far below the output
	if n := after.TotalAlloc - before.TotalAlloc; n > margin {
		t.Fatalf("rendering allocated %d MiB before it stopped, want under %d MiB", n>>20, margin>>20)
	}
}

// TestAWhenIsRenderedOnceForEachValueOfWhatItReads: the nodes of a stage
// that share what a when reads (here a label) share its decision, rendered
// once; nodes that differ in it are decided each by its own value, and a
// when that reads the node's id is rendered for every node.
func TestAWhenIsRenderedOnceForEachValueOfWhatItReads(t *testing.T) {
	t.Parallel()
	role := &store.RunStep{Name: "s", When: `{{ or (eq .node.labels.role "db") (eq .node.labels.role "cache") }}`}
	byID := &store.RunStep{Name: "s", When: `{{ ne .node.id "" }}`}
	ts := newStepTemplates()
	for i := range 100 {
		labels := map[string]string{"role": "db"}
		switch {
		case i%10 == 1:
			labels["role"] = "web"
		case i%10 == 2:
			labels = nil // missing: not "db"
		}
		c := newNodeContext(nil, fmt.Sprintf("n%d", i), labels, nil)
		run, err := ts.evalWhen(role, c)
		if err != nil || run != (labels["role"] == "db") {
			t.Fatalf("node n%d with labels %v: when decided %t, %v", i, labels, run, err)
		}
		if run, err := ts.evalWhen(byID, c); err != nil || !run {
			t.Fatalf("node n%d: when on its id decided %t, %v", i, run, err)
		}
	}
	if n := len(ts.whens); n != 3+100 {
		t.Fatalf("%d renders kept; want 3 for the role (db, web, missing) and 100 for the id", n)
	}
}
