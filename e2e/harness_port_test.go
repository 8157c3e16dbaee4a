package e2e

import "testing"

// TestFreePortIsBelowTheEphemeralRange: a process killed and restarted on
// its port (the chaos test's cores and agents) must find it free, so it
// must not be one an outgoing connection can take meanwhile.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	for range 20 {
		if port := freePort(t); port >= low || port < 1024 {
			t.Fatalf("freePort = %d, want in [1024, %d)", port, low)
		}
	}
}
