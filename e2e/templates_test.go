package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// worstAcceptedRun is the costliest run the template limits let through,
// as an operator would post it: 50 steps, each with a when of the most
// comparisons a template may hold (core/runs/tmpl.MaxNodes) and args of a
// long text with as many fields as are left, up to the run's 256 KiB.
func worstAcceptedRun(cluster string) []byte {
	when := "{{ or" + strings.Repeat(` (eq .node.labels.x "y")`, 20) + " }}"
	args := strings.Repeat("x", 4000) + strings.Repeat("{{ .node.id }}", 31)
	var steps []map[string]any
	for i := range 50 {
		steps = append(steps, map[string]any{"name": fmt.Sprintf("s%d", i), "kind": "example.com/append",
			"when": when, "args": map[string]string{"v": args}})
	}
	b, _ := json.Marshal(map[string]any{"cluster_id": cluster, "stages": []any{map[string]any{
		"name": "worst", "target": map[string]any{"all": true}, "steps": steps}}})
	return b
}

// Issue 30, item 1, against a real core: the operator's 199-byte body
// that held every write for 100 s is refused with a 400 at once, naming
// range; and while an operator posts the worst run the new limits accept, an
// admin's write answers within 1 s and the core stays under 200 MB.
func TestStepTemplatesCannotFreezeARealCore(t *testing.T) {
	// Not parallel: it measures how fast an agent or the core answers under a
	// flood, so it runs alone among the end-to-end tests (they run four at a
	// time), as its bounds assume.
	f := newFleet(t, 2, "")
	post := func(token string, body []byte) (int, string, time.Duration) {
		return f.post(token, "/api/v1/runs", body)
	}
	const atOnce = time.Second // the body cost 100 s before; a refusal at parse is milliseconds
	for _, when := range []string{`{{range 40000}}{{range 40000}}{{end}}{{end}}true`, `{{range 300}}{{printf \"%01000000d\" 0}}{{end}}`} {
		body := `{"cluster_id":"e2e","stages":[{"name":"s","target":{"all":true},"steps":[{"name":"a","kind":"example.com/append","when":"` + when + `"}]}]}`
		st, out, took := post(f.secrets["alice"], []byte(body))
		if st != http.StatusBadRequest || !strings.Contains(out, "range is not allowed") || !strings.Contains(out, "step a") {
			t.Fatalf("the issue's %d-byte body: %d %s, want 400 naming step a and range", len(body), st, out)
		}
		if took > atOnce {
			t.Fatalf("the issue's body was refused after %s, want at once (under %s)", took, atOnce)
		}
	}

	worst := worstAcceptedRun("e2e")
	if st, out, _ := post(f.secrets["alice"], worst); st != http.StatusCreated {
		t.Fatalf("the worst accepted run (%d bytes): %d %.300s", len(worst), st, out)
	}
	f.answersWithinBoundsWhile(t, "the worst accepted run", 10, func() error {
		if st, out, _ := post(f.secrets["alice"], worst); st != http.StatusCreated {
			return fmt.Errorf("the worst accepted run: %d %.300s", st, out)
		}
		return nil
	})
}
