package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Item 3 of the attack review, on the agent: request metrics take their
// labels from closed sets, so odd methods and paths neither grow /metrics
// nor put the client's text in it.
func TestMetricsLabelsAreAClosedSet(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do(t, http.MethodGet, "/api/v1/health", "")
	_, before := f.do(t, http.MethodGet, "/metrics", "")

	const marker = "ATTACKERTEXT"
	for i := range 50 {
		method := fmt.Sprintf("%s%d%s", marker, i, strings.Repeat("X", 4096))
		for _, path := range []string{
			fmt.Sprintf("/%s/%d/%s", marker, i, strings.Repeat("p", 2048)),
			fmt.Sprintf("/api/v1/actions/%s%d", marker, i),
			"/api/v1/health",
		} {
			f.do(t, method, path, "")
			f.do(t, http.MethodGet, path, "")
		}
	}
	status, after := f.do(t, http.MethodGet, "/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	if strings.Contains(string(after), marker) {
		t.Fatalf("/metrics holds text the client chose:\n%.2000s", after)
	}
	if grown := len(after) - len(before); grown > 8<<10 {
		t.Fatalf("/metrics grew by %d bytes after 300 odd requests", grown)
	}
	for _, want := range []string{
		`muster_agent_api_requests_total{code="405",method="other",route="/api/v1/health"} 50`,
		`muster_agent_api_requests_total{code="404",method="GET",route="unmatched"} 50`,
		`muster_agent_api_requests_total{code="404",method="GET",route="/api/v1/actions/:id"} 50`,
	} {
		if !strings.Contains(string(after), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
