package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Item 3 of the attack review: a raw method or path as a Prometheus label
// let anyone, before login, grow the core's memory and /metrics without
// bound. Labels come from a closed set.
func TestMetricsLabelsAreAClosedSet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, before := e.do(http.MethodGet, "/metrics", "", nil)

	const marker = "ATTACKERTEXT"
	for i := range 50 {
		method := fmt.Sprintf("%s%d%s", marker, i, strings.Repeat("X", 4096))
		for _, path := range []string{
			fmt.Sprintf("/%s/%d/%s", marker, i, strings.Repeat("p", 2048)),
			fmt.Sprintf("/api/v1/actions/%s%d", marker, i),
			fmt.Sprintf("/api/v1/clusters/%s%d/orchestrate", marker, i),
			"/health",
		} {
			e.do(method, path, "", nil)
			e.do(http.MethodGet, path, "", nil)
		}
	}
	status, after := e.do(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	if strings.Contains(string(after), marker) {
		t.Fatalf("/metrics holds text the client chose:\n%.2000s", after)
	}
	// A few series more (other methods, unmatched routes, their codes), not
	// one per request: far below what 200 distinct requests would add.
	if grown := len(after) - len(before); grown > 8<<10 {
		t.Fatalf("/metrics grew by %d bytes after 400 odd requests", grown)
	}
	for _, want := range []string{`method="other"`, `route="unmatched"`, `route="/api/v1/actions/:id"`} {
		if !strings.Contains(string(after), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
