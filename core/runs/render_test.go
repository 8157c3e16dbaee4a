package runs

import (
	"encoding/json"
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
