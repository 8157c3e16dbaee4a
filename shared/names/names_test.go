package names

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"db-1", true},
		{"eu_west.2", true},
		{"A", true},
		{strings.Repeat("a", MaxID), true},
		{"", false},
		{"db 1", false},
		{"db/1", false},
		{"db@1", false},
		{".", false},
		{"..", false},
		{"-n", false},
		{"_n", false},
		{"nœud", false},
		{strings.Repeat("a", MaxID+1), false},
	} {
		err := CheckID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckID(%q) = %v, want ok %v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckID(%q): %v is not ErrInvalid", tc.id, err)
		}
	}
}

func TestCheckStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"main", true},
		{"roll-out_2.a", true},
		{".", true}, // as the core always took it: a name, not a path
		{strings.Repeat("s", MaxStep), true},
		{"", false},
		{"a b", false},
		{"a/b", false},
		{"a\x1b[31m", false},
		{"étape", false},
		{strings.Repeat("s", MaxStep+1), false},
	} {
		err := CheckStep(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckStep(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckStep(%q): %v is not ErrInvalid", tc.name, err)
		}
	}
}

func TestCheckToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"bob", true},
		{"ci@example.com", true},
		{"svc.deploy-2_x", true},
		{strings.Repeat("b", MaxToken), true},
		{"", false},
		{"@bob", false},
		{"bob smith", false},
		{"bob<script>", false},
		{strings.Repeat("b", MaxToken+1), false},
	} {
		err := CheckToken(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckToken(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckToken(%q): %v is not ErrInvalid", tc.name, err)
		}
	}
}
