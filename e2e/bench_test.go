package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssMB reads the resident set size of pid from /proc.
func rssMB(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkAgentIdleRSS starts a real agent, lets it settle for a few
// seconds, and reports its resident memory. The goal is under 20 MB.
func BenchmarkAgentIdleRSS(b *testing.B) {
	var total float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, _, _ := agentProc(b, "rss", "")
		time.Sleep(3 * time.Second) // the measurement is "a few seconds after start"
		total += rssMB(b, p.cmd.Process.Pid)
		p.kill()
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N), "agent_idle_rss_MB")
}
