package runs

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/musterhq/muster/core/store"
)

// csi matches a terminal's control sequence (ESC [ … final byte): colours
// and cursor moves.
var csi = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]")

// Bounds of the output a failed node keeps as its reason (LastLines).
const (
	WhyLines = 5
	WhyBytes = 512
)

// LastLines is the end of a failed step's output that its node keeps as
// its reason: its last WhyLines lines that are not blank, at most WhyBytes
// bytes of them (cut at the start, on a rune boundary), with terminal
// escape sequences (colours) taken out and invalid UTF-8 replaced. Any
// other control character stays: every surface escapes it.
func LastLines(output string) string {
	output = csi.ReplaceAllString(strings.ToValidUTF8(output, "\uFFFD"), "")
	lines := strings.Split(strings.ReplaceAll(output, "\r\n", "\n"), "\n")
	var kept []string
	for i := len(lines) - 1; i >= 0 && len(kept) < WhyLines; i-- {
		if l := strings.TrimRight(lines[i], " \t\r"); strings.TrimSpace(l) != "" {
			kept = append(kept, l)
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	s := strings.Join(kept, "\n")
	if len(s) > WhyBytes {
		s = s[len(s)-WhyBytes:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		s = "…" + s
	}
	return s
}

// shownFailures bounds the failed nodes a run.paused event names.
const shownFailures = 3

// failuresOf says why r's first failed nodes failed, for a run.paused
// event: a text to add to its message ("; n1: step upgrade FAILED (attempt
// 1 of 1): run exited with status 3: E: disk full", the last line of each
// node's output) and the same as the event's data.
func failuresOf(r *store.Run) (string, []map[string]any) {
	var b strings.Builder
	var data []map[string]any
	for i := range r.Stages {
		st := &r.Stages[i]
		for _, n := range st.Failed {
			w, ok := st.Why[n]
			if !ok || len(data) == shownFailures {
				continue
			}
			fmt.Fprintf(&b, "; %s: %s", n, w.Reason)
			if w.Output != "" {
				b.WriteString(": " + w.Output[strings.LastIndexByte(w.Output, '\n')+1:])
			}
			data = append(data, map[string]any{"stage": st.Name, "node": n, "reason": w.Reason, "output": w.Output})
		}
	}
	return b.String(), data
}
