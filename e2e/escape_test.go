package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// Item 4 of the attack review, its last line: the CLI escapes control
// characters in everything it prints. A real command on a real agent writes
// a colour change, a carriage return, a C1 CSI, a bidi override and a
// terminal title to its output; the core pulls it; the muster binary prints
// it in show, list, watch and events as visible escapes, and -o json as JSON
// escapes of the same text.
func TestCLIEscapesWhatAnAgentsCommandPrinted(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	script := filepath.Join(base, "hostile.sh")
	// \033 ESC, \r, \302\233 U+009B (C1 CSI), \342\200\256 U+202E, \007 BEL.
	body := "#!/bin/sh\nprintf 'ok\\n\\033[31mRED\\rDONE\\302\\2332J\\342\\200\\256txt\\033]0;pwned\\007\\n' >&2\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: base,
		actionsYAML: fmt.Sprintf("actions:\n  external:\n    - kind: example.com/hostile\n      run: [%q]\n", script)})
	a := f.create("node-1", "example.com/hostile", `{}`)
	f.approve(a.ID)
	done := f.waitCore(a.ID, 20*time.Second, action.Done, action.Failed)
	const raw = "\x1b[31mRED\rDONE\u009b2J\u202etxt\x1b]0;pwned\x07"
	if done.State != action.Done || !strings.Contains(done.Output, raw) {
		t.Fatalf("the core holds %s with output %q, want DONE with %q", done.State, done.Output, raw)
	}
	sec, err := f.admin.CreateToken(ctxT(t), "carol", []string{"viewer"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "MUSTER_ADDR=http://"+f.core.Addr(), "MUSTER_TOKEN="+sec.Token)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const escaped = `\x1b[31mRED\rDONE\u009b2J\u202etxt\x1b]0;pwned\x07`
	for _, args := range [][]string{{"action", "show", a.ID}, {"events", "--action", a.ID, "--limit", "50"}} {
		out := run(args...)
		if strings.ContainsAny(out, "\x1b\r\x07\u009b\u202e") {
			t.Errorf("muster %s printed control characters raw:\n%q", strings.Join(args, " "), out)
		}
		if args[0] == "action" && !strings.Contains(out, "\n"+escaped+"\n") {
			t.Errorf("muster action show does not print the output line escaped:\n%s", out)
		}
	}
	for _, args := range [][]string{{"action", "list"}, {"action", "watch", a.ID}} {
		if out := run(args...); strings.ContainsAny(out, "\x1b\r\x07\u009b\u202e") {
			t.Errorf("muster %s printed control characters raw:\n%q", strings.Join(args, " "), out)
		}
	}
	out := run("action", "show", a.ID, "-o", "json")
	if strings.ContainsAny(out, "\x1b\r\x07\u009b\u202e") {
		t.Fatalf("-o json printed control characters raw:\n%q", out)
	}
	if got := decodeJSON[action.Action](t, out); got.Output != done.Output {
		t.Fatalf("-o json output %q, want %q", got.Output, done.Output)
	}
}
