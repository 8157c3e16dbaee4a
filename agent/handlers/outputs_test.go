package handlers

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExternalOutputsAreCapturedThroughFd3(t *testing.T) {
	t.Parallel()
	s := script(t, `echo "$MUSTER_OUTPUTS" ; printf '{"previous":"1.2.3","note":"a \\"quoted\\" <b>"}' > "$MUSTER_OUTPUTS"`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
	x := execFor("example.com/x", `{}`)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done {
		t.Fatalf("run: %+v output %q", res, x.Output())
	}
	if got := string(x.Outputs); got != `{"note":"a \"quoted\" \u003cb\u003e","previous":"1.2.3"}` {
		t.Fatalf("outputs %s", got)
	}
	// The file has no name of its own: the command gets it as fd 3.
	if path := strings.TrimSpace(x.Output()); path != "/dev/fd/3" {
		t.Fatalf("MUSTER_OUTPUTS=%q, want /dev/fd/3", path)
	}
}

func TestExternalWithoutOutputsHasNone(t *testing.T) {
	t.Parallel()
	s := script(t, `true`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
	x := execFor("example.com/x", `{}`)
	if res := drive(t, context.Background(), h, x); res.Status != Done || x.Outputs != nil {
		t.Fatalf("result %+v outputs %s", res, x.Outputs)
	}
}

func TestBadOutputsFailTheAction(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	many.WriteString("{")
	for i := range 33 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"k%d":"v"`, i)
	}
	many.WriteString("}")
	for name, body := range map[string]string{
		"not an object": `["a"]`,
		"not strings":   `{"a":1}`,
		"33 keys":       many.String(),
		"over 4 KiB":    `{"a":"` + strings.Repeat("x", 4200) + `"}`,
		"null":          `null`,
	} {
		if _, err := CheckOutputs([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := script(t, `echo '{"a":1}' > "$MUSTER_OUTPUTS"`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
	x := execFor("example.com/x", `{}`)
	if res := drive(t, context.Background(), h, x); res.Status != Failed || !strings.Contains(res.Message, "outputs") {
		t.Fatalf("result %+v, want FAILED naming the outputs", res)
	}
}

func FuzzCheckOutputs(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{}`, `null`, `[]`, `{"a":1}`, "", `{"a":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := CheckOutputs(b)
		if err == nil && out != nil && len(out) > 6*MaxOutputBytes+2 {
			t.Fatalf("outputs of %d bytes accepted", len(out))
		}
	})
}

// outputUsers are whom the commands of the attack tests run as: the agent's
// own user, and nobody when the tests run as root (as in CI).
func outputUsers(t *testing.T) []string {
	users := []string{""}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("nobody"); err == nil {
			users = append(users, "nobody")
		}
	}
	return users
}

// A command that replaces $MUSTER_OUTPUTS with a symlink to a file only the
// agent may read must not get that file's content into its outputs, which
// every viewer reads.
func TestExternalOutputsSymlinkDoesNotLeak(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(`{"secret":"s3cr3t-value"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, u := range outputUsers(t) {
		t.Run("user="+u, func(t *testing.T) {
			t.Parallel()
			// Inline: the test's temporary files are not readable by nobody.
			spec := External{Kind: "example.com/x", User: u, Run: []string{"/bin/sh", "-c",
				`rm -f "$MUSTER_OUTPUTS"; ln -s "$0" "$MUSTER_OUTPUTS"; exit 0`, secret}}
			h, _ := registry(t, spec).Get("example.com/x")
			x := execFor("example.com/x", `{}`)
			res := drive(t, context.Background(), h, x)
			if strings.Contains(string(x.Outputs), "s3cr3t") || strings.Contains(res.Message+x.Output(), "s3cr3t") {
				t.Fatalf("the secret leaked: result %+v outputs %s output %q", res, x.Outputs, x.Output())
			}
		})
	}
}

// A command that replaces $MUSTER_OUTPUTS with a FIFO must not hang the
// runner once it has exited.
func TestExternalOutputsFIFODoesNotHang(t *testing.T) {
	t.Parallel()
	for _, u := range outputUsers(t) {
		t.Run("user="+u, func(t *testing.T) {
			t.Parallel()
			spec := External{Kind: "example.com/x", User: u, Run: []string{"/bin/sh", "-c",
				`rm -f "$MUSTER_OUTPUTS"; mkfifo "$MUSTER_OUTPUTS"; exit 0`}}
			h, _ := registry(t, spec).Get("example.com/x")
			x := execFor("example.com/x", `{}`)
			done := make(chan Result, 1)
			go func() {
				ctx := context.Background()
				for {
					if res := h.Step(ctx, x); res.Status != Running {
						done <- res
						return
					}
					<-time.After(10 * time.Millisecond)
				}
			}()
			select {
			case res := <-done:
				if res.Status != Done {
					t.Fatalf("result %+v output %q", res, x.Output())
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the runner hung reading the outputs")
			}
		})
	}
}

// A command running as another user writes its outputs by name, as a
// program that opens the path itself (dash, not bash's /dev/fd emulation).
func TestExternalOutputsWrittenByItsUser(t *testing.T) {
	t.Parallel()
	for _, u := range outputUsers(t) {
		t.Run("user="+u, func(t *testing.T) {
			t.Parallel()
			spec := External{Kind: "example.com/x", User: u, Run: []string{"/bin/sh", "-c",
				`printf '{"a":"b"}' > "$MUSTER_OUTPUTS"; echo "$MUSTER_OUTPUTS"`}}
			h, _ := registry(t, spec).Get("example.com/x")
			x := execFor("example.com/x", `{}`)
			res := drive(t, context.Background(), h, x)
			if res.Status != Done || string(x.Outputs) != `{"a":"b"}` {
				t.Fatalf("result %+v outputs %s output %q", res, x.Outputs, x.Output())
			}
		})
	}
}
