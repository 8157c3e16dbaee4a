package handlers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestExternalOutputsAreCapturedAndTheFileRemoved(t *testing.T) {
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
	path := strings.TrimSpace(x.Output())
	if path == "" {
		t.Fatal("MUSTER_OUTPUTS was not set")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("outputs file %s still there: %v", path, err)
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
