package glob

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "example.com/x", true},
		{"*", "example.com/os/reboot", true},
		{"example.com/**", "example.com/os/reboot", true},
		{"example.com/**", "example.com/x", true},
		{"example.com/*", "example.com/os/reboot", false},
		{"example.com/db.*", "example.com/db.backup", true},
		{"example.com/{db,os}.*", "example.com/os.reboot", true},
		{"example.com/[", "example.com/[", false},
		{"prod-*", "prod-eu", true},
	} {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
	if Valid("example.com/[") || !Valid("example.com/**") {
		t.Fatal("Valid")
	}
}

// Issue 17, item 5: one glob rule for every kind pattern. No code of the
// core matches a pattern other than through Match: path.Match once let
// example.com/** miss every nested kind in the disruption budget.
func TestOneGlobRuleForEveryKindPattern(t *testing.T) {
	t.Parallel()
	other := regexp.MustCompile(`\b(path|filepath)\.Match\(|doublestar\.`)
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.Dir(p) == "../glob" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			if other.MatchString(l) {
				t.Errorf("%s:%d matches a pattern itself, not with glob.Match: %s", p, i+1, strings.TrimSpace(l))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
