package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/secret"
)

// secretsRegistry is a registry whose agent has the secrets values, in
// files of a directory of their own (mode 0600).
func secretsRegistry(t *testing.T, values map[string]string, ext ...External) (*Registry, secret.Config) {
	t.Helper()
	dir := t.TempDir()
	for n, v := range values {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := secret.Config{Dir: dir}
	r, err := NewRegistry(ext, Env{NodeID: "node-1", ClusterID: "c-1", Grace: 500 * time.Millisecond, Secrets: c.Read})
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// TestTheCommandSeesTheSecretAndNothingReportedHoldsIt: the command gets
// the value in the record on stdin; the record kept, the output (printed
// whole, and cut between two writes), the outputs, the check's message and
// the failure's reason hold [redacted:NAME] instead.
func TestTheCommandSeesTheSecretAndNothingReportedHoldsIt(t *testing.T) {
	t.Parallel()
	const value = "hunter2-s3cr3t-value"
	dir := t.TempDir()
	run := script(t, `cat > "`+dir+`/stdin.json"; cat "`+dir+`/stdin.json"; echo
printf 'hunter2-'; sleep 0.2; printf 's3cr3t-value\n'
printf '{"leak":"%s"}' "$(sed 's/.*pw=\([^"]*\).*/\1/' "`+dir+`/stdin.json")" > "$MUSTER_OUTPUTS"`)
	check := script(t, `echo '{"state":"FAILED","message":"bad password hunter2-s3cr3t-value"}'`)
	r, _ := secretsRegistry(t, map[string]string{"db-password": value},
		External{Kind: "example.com/x", Run: []string{"/bin/sh", run}},
		External{Kind: "example.com/y", Run: []string{"/bin/sh", "-c", "true"}, Check: []string{"/bin/sh", check}})
	h, _ := r.Get("example.com/x")
	args := `{"dsn":"pw={{ secret \"db-password\" }}"}`
	if err := h.Validate(json.RawMessage(args)); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	x := execFor("example.com/x", args)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done {
		t.Fatalf("result %+v, output %q", res, x.Output())
	}
	var rec action.Action
	b, _ := os.ReadFile(filepath.Join(dir, "stdin.json"))
	if err := json.Unmarshal(b, &rec); err != nil || string(rec.Args) != `{"dsn":"pw=`+value+`"}` {
		t.Fatalf("the command got %s (%v); want the value resolved", b, err)
	}
	if string(x.Action.Args) != args {
		t.Fatalf("the record kept holds %s, not the reference", x.Action.Args)
	}
	h, _ = r.Get("example.com/y")
	y := execFor("example.com/y", args)
	resY := drive(t, context.Background(), h, y)
	if resY.Status != Failed {
		t.Fatalf("result %+v, output %q", resY, y.Output())
	}
	for what, s := range map[string]string{"output": x.Output(), "outputs": string(x.Outputs), "reason": resY.Message} {
		if strings.Contains(s, value) || strings.Contains(s, "s3cr3t") {
			t.Errorf("the %s holds the value: %q", what, s)
		}
		if !strings.Contains(s, "[redacted:db-password]") {
			t.Errorf("the %s = %q; want [redacted:db-password] in place of the value", what, s)
		}
	}
	if n := strings.Count(x.Output(), "[redacted:db-password]"); n != 2 {
		t.Errorf("output %q: want the value redacted twice (whole, and cut between two writes)", x.Output())
	}
}

// TestASecretTheAgentCannotReadFailsTheAction: an unknown secret, or a
// file readable by others, fails the action before its command runs, with
// the reason; a reference that is not one is refused at push.
func TestASecretTheAgentCannotReadFailsTheAction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := script(t, `touch "`+dir+`/ran"`)
	r, c := secretsRegistry(t, map[string]string{"loose": "x"}, External{Kind: "example.com/x", Run: []string{"/bin/sh", run}})
	if err := os.Chmod(filepath.Join(c.Dir, "loose"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/x")
	for args, want := range map[string]string{
		`{"a":"{{ secret \"db-password\" }}"}`: `no such secret "db-password" on this node`,
		`{"a":"{{ secret \"loose\" }}"}`:       "mode 0644",
	} {
		x := execFor("example.com/x", args)
		res := drive(t, context.Background(), h, x)
		if res.Status != Failed || !strings.Contains(res.Message, want) {
			t.Errorf("%s: result %+v; want FAILED saying %q", args, res, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran without its secret")
	}
	if err := h.Validate(json.RawMessage(`{"a":"{{ secret \"../etc/shadow\" }}"}`)); !errors.Is(err, ErrBadArgs) {
		t.Errorf("Validate of a bad reference = %v; want ErrBadArgs", err)
	}
	// An agent that names no secret says so.
	h, _ = registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", run}}).Get("example.com/x")
	res := drive(t, context.Background(), h, execFor("example.com/x", `{"a":"{{ secret \"db\" }}"}`))
	if res.Status != Failed || !strings.Contains(res.Message, "names no secrets") {
		t.Errorf("result %+v; want FAILED, the agent naming no secrets", res)
	}
}

// Issue 34, item 11: while a command runs, what the agent saves of its
// output (LiveOutput) never holds the first part of a secret's value
// written in pieces: the part that could begin a value is held back until
// the rest shows it is one (redacted) or is not (shown).
func TestLiveOutputHoldsBackTheBeginningOfASecret(t *testing.T) {
	t.Parallel()
	x := NewExec(&action.Action{}, false)
	r := &secret.Redactor{}
	r.Add("db", "s3cr3t")
	x.addRedactor(r)
	_, _ = x.Write([]byte("connecting with s3c"))
	if got := x.LiveOutput(); got != "connecting with " {
		t.Fatalf("live output %q, want the beginning of the value held back", got)
	}
	_, _ = x.Write([]byte("r3t done"))
	if got := x.LiveOutput(); got != "connecting with [redacted:db] done" {
		t.Fatalf("live output %q once the value is whole", got)
	}
	_, _ = x.Write([]byte(" s3x"))
	if got := x.LiveOutput(); got != "connecting with [redacted:db] done s3x" {
		t.Fatalf("live output %q: what turned out not to be a value is shown", got)
	}
}
