package secret

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, s string
		want    []string
		bad     bool
	}{
		{"none", "plain", nil, false},
		{"other template", "{{ .node.id }}", nil, false},
		{"canonical", `{{ secret "db-password" }}`, []string{"db-password"}, false},
		{"tight", `x{{secret "a_1"}}y{{ secret "b" }}{{secret "a_1"}}`, []string{"a_1", "b"}, false},
		{"path", `{{ secret "../etc/shadow" }}`, nil, true},
		{"upper", `{{ secret "DB" }}`, nil, true},
		{"dot", `{{ secret "db.password" }}`, nil, true},
		{"unquoted", `{{ secret db }}`, nil, true},
		{"trim markers", `{{- secret "db" -}}`, []string{"db"}, false},
		{"pipe", `{{ secret "db" | upper }}`, nil, true},
		{"escaped quote", `{{ secret "d\"b" }}`, nil, true},
		{"two args", `{{ secret "a" "b" }}`, nil, true},
		{"empty", `{{ secret "" }}`, nil, true},
		{"word boundary", `{{ secrets "a" }}`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(tc.s)
			if tc.bad {
				if !errors.Is(err, ErrBadRef) {
					t.Fatalf("Find(%q) = %v, %v; want ErrBadRef", tc.s, got, err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("Find(%q) = %v, %v; want %v", tc.s, got, err, tc.want)
			}
		})
	}
}

// setup writes secrets into a directory of their own, mode 0600.
func setup(t *testing.T, values map[string]string) Config {
	t.Helper()
	dir := t.TempDir()
	for n, v := range values {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Config{Dir: dir}
}

func TestReadChecksTheFile(t *testing.T) {
	t.Parallel()
	c := setup(t, map[string]string{"good": "s3cr3t\n", "loose": "x", "empty": "\n", "theirs": "x"})
	if err := os.Chmod(filepath.Join(c.Dir, "loose"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(c.Dir, "theirs"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		// Not root: a file of another user cannot be made; a file of
		// the user's own is read, which the check must allow.
		c.Files = map[string]string{"theirs": filepath.Join(c.Dir, "good")}
	}
	if v, err := c.Read("good"); err != nil || v != "s3cr3t" {
		t.Fatalf("Read(good) = %q, %v; want s3cr3t", v, err)
	}
	for name, want := range map[string]string{
		"loose":   "mode 0644",
		"empty":   "is empty",
		"missing": `no such secret "missing" on this node`,
	} {
		_, err := c.Read(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s) = %v; want an error saying %q", name, err, want)
		}
	}
	_, err := c.Read("theirs")
	if os.Geteuid() == 0 && (err == nil || !strings.Contains(err.Error(), "owned by uid 65534")) {
		t.Errorf("Read(theirs) = %v; want refused as owned by another user", err)
	}
	if err := os.Mkdir(filepath.Join(c.Dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read("adir"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Read(adir) = %v; want not a regular file", err)
	}
	if got := strings.Join(c.Names(), ","); !strings.HasPrefix(got, "empty,good,loose") {
		t.Errorf("Names() = %s; want the files of the directory (not its directories)", got)
	}
}

func TestResolveAndRedact(t *testing.T) {
	t.Parallel()
	c := setup(t, map[string]string{"db-password": `p"w`, "token": "tok-123"})
	args := json.RawMessage(`{"dsn":"user:{{ secret \"db-password\" }}@db","list":["{{secret \"token\"}}",1],"plain":"x"}`)
	got, r, err := Resolve(args, c.Read)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		DSN  string `json:"dsn"`
		List []any  `json:"list"`
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
	if v.DSN != `user:p"w@db` || v.List[0] != "tok-123" {
		t.Fatalf("resolved %s", got)
	}
	out := r.Redact(`saw user:p"w@db and tok-123 and ` + string(got))
	for _, secret := range []string{`p"w`, `p\"w`, "tok-123"} {
		if strings.Contains(out, secret) {
			t.Fatalf("Redact left %q in %s", secret, out)
		}
	}
	if !strings.Contains(out, "[redacted:db-password]") || !strings.Contains(out, "[redacted:token]") {
		t.Fatalf("Redact = %s; want [redacted:NAME] in place of the values", out)
	}
	j := r.RedactJSON(json.RawMessage(`{"a":"tok-123","tok-123":"b"}`))
	if strings.Contains(string(j), "tok-123") {
		t.Fatalf("RedactJSON = %s", j)
	}

	if _, _, err := Resolve(json.RawMessage(`{"a":"{{ secret \"nope\" }}"}`), c.Read); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Resolve of an unknown secret = %v; want ErrUnknown", err)
	}
	same, r, err := Resolve(json.RawMessage(`{"a":"b"}`), c.Read)
	if err != nil || string(same) != `{"a":"b"}` || !r.Empty() {
		t.Fatalf("Resolve without references = %s, %v, %v", same, r, err)
	}
	var nilR *Redactor
	if nilR.Redact("x") != "x" {
		t.Fatal("a nil Redactor changed its input")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	errs := Config{Dir: "rel", Files: map[string]string{"Bad.Name": "/x", "ok": "rel"}}.Validate("secrets")
	got := errs.Error()
	for _, want := range []string{"secrets.dir", "secrets.files", "secrets.files.ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate = %s; want an error on %s", got, want)
		}
	}
	if errs := (Config{Dir: "/etc/muster/secrets", Files: map[string]string{"db": "/x"}}).Validate("secrets"); len(errs) != 0 {
		t.Errorf("Validate of a good config = %v", errs)
	}
}

// FuzzFind: Find never panics, and every name it returns is plain and is
// resolved by Resolve in a string holding it.
func FuzzFind(f *testing.F) {
	for _, s := range []string{`{{ secret "db" }}`, `{{secret "a"}}{{secret "b"}}`, `{{ secret "../x" }}`,
		`{{- secret "a" -}}`, `{{ secret }}`, `{{ secret "a" | upper }}`, `{{{{ secret "a" }}}}`, "{{ secret `a` }}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := Find(s)
		if err != nil {
			return
		}
		for _, n := range names {
			if !ValidName(n) {
				t.Fatalf("Find(%q) returned %q, not a plain name", s, n)
			}
		}
		args, _ := json.Marshal(map[string]string{"a": s})
		out, _, err := Resolve(args, func(name string) (string, error) { return "VALUE", nil })
		if err != nil {
			t.Fatalf("Resolve(%s): %v", args, err)
		}
		if len(names) > 0 && !strings.Contains(string(out), "VALUE") {
			t.Fatalf("Resolve(%s) = %s: a reference Find saw was not resolved", args, out)
		}
	})
}

func TestDefuseLeavesNoReference(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{{ secret "db" }}`, `x{{secret "db"}}y`, `{{- secret "db" -}}`, `{{{{ secret "db" }}}}`} {
		d := Defuse(s)
		if names, err := Find(d); err != nil || len(names) > 0 {
			t.Errorf("Defuse(%q) = %q: Find sees %v, %v", s, d, names, err)
		}
		args, _ := json.Marshal(map[string]string{"a": d})
		if out, _, err := Resolve(args, func(string) (string, error) { return "VALUE", nil }); err != nil || strings.Contains(string(out), "VALUE") {
			t.Errorf("Defuse(%q) = %q resolves to %s, %v", s, d, out, err)
		}
	}
	if got := Defuse("{{ .a }} plain"); got != "{{ .a }} plain" {
		t.Errorf("Defuse changed a string without a reference: %q", got)
	}
}

// Resolving and redacting change strings only: a large integer beside a
// reference reaches the command as written.
func TestResolveKeepsNumbersAsWritten(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"id":9007199254740993,"f":1.50,"p":"{{ secret \"db\" }}"}`)
	out, r, err := Resolve(args, func(string) (string, error) { return "pw", nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != `{"f":1.50,"id":9007199254740993,"p":"pw"}` {
		t.Fatalf("Resolve = %s", got)
	}
	if got := string(r.RedactJSON(out)); got != `{"f":1.50,"id":9007199254740993,"p":"[redacted:db]"}` {
		t.Fatalf("RedactJSON = %s", got)
	}
}
