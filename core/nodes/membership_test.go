package nodes

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

func TestMembershipMissingAndUnexpected(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	node := func(id, status string, last *time.Time, l map[string]string) store.Node {
		// Last contact and the last change of the record coincide here;
		// the grace counts from the change (the last contact is coarse).
		n := store.Node{ClusterID: "c1", ID: id, Status: status, LastContact: last, Labels: l}
		if last != nil {
			n.UpdatedTS = *last
		}
		return n
	}
	web := map[string]string{"role": "web"}
	all := []store.Node{
		node("a", store.NodeUp, ago(time.Second), web),
		node("b", store.NodeDown, ago(time.Minute), web),    // DOWN within the grace
		node("c", store.NodeDown, ago(10*time.Minute), web), // DOWN past the grace
		node("d", store.NodeDown, nil, web),                 // never contacted
		node("x", store.NodeUp, ago(time.Second), map[string]string{"role": "db"}),
		{ClusterID: "other", ID: "e", Status: store.NodeUp},
	}
	for _, tc := range []struct {
		name   string
		expect Expect
		want   Members
	}{
		{"ids", Expect{Nodes: []string{"e", "d", "c", "b", "a"}}, Members{
			Missing:    []Missing{{"c", "down for more than 5m0s"}, {"d", "never seen"}, {"e", "never seen"}},
			Unexpected: []string{"x"}}},
		{"a longer grace keeps c", Expect{Nodes: []string{"a", "c"}, Grace: time.Hour}, Members{
			Unexpected: []string{"b", "d", "x"}}},
		{"a shorter grace loses b", Expect{Nodes: []string{"a", "b"}, Grace: 30 * time.Second}, Members{
			Missing: []Missing{{"b", "down for more than 30s"}}, Unexpected: []string{"c", "d", "x"}}},
		{"count with selector", Expect{Count: 3, Selector: web}, Members{
			Missing: []Missing{{"", "1 of 3 nodes matching role=web"}}, Unexpected: []string{"x"}}},
		{"count met", Expect{Count: 2, Selector: web}, Members{Unexpected: []string{"x"}}},
		{"count without selector", Expect{Count: 4}, Members{Missing: []Missing{{"", "1 of 4 nodes"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Membership{"c1": tc.expect}.Of("c1", all, now)
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v (%v), want %+v", got, ok, tc.want)
			}
		})
	}
	if _, ok := (Membership{"c1": {Nodes: []string{"a"}}}).Of("c2", all, now); ok {
		t.Fatal("a cluster without a declaration has members")
	}
	m, _ := Membership{"c1": {Nodes: []string{"a", "e"}, Grace: time.Minute}}.Of("c1", all, now)
	if got := m.Alert(); got != "missing: e" {
		t.Fatalf("alert %q", got)
	}
	// The grace counts from the change that made a node DOWN, not from
	// its last contact (stored about once a minute).
	f := node("f", store.NodeDown, ago(10*time.Minute), web)
	f.UpdatedTS = now.Add(-time.Minute)
	if got, _ := (Membership{"c1": {Nodes: []string{"f"}}}).Of("c1", []store.Node{f}, now); len(got.Missing) != 0 {
		t.Fatalf("a node DOWN for a minute is missing: %+v", got)
	}
}

func TestExpectValidate(t *testing.T) {
	t.Parallel()
	id := func(s string) error {
		if s == "" || s == "Bad!" {
			return errors.New("bad id")
		}
		return nil
	}
	lab := func(l map[string]string) error {
		if _, ok := l[""]; ok {
			return errors.New("empty key")
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		e    Expect
		want []string
	}{
		{"ok ids", Expect{Nodes: []string{"a", "b"}, Grace: time.Minute}, nil},
		{"ok count", Expect{Count: 2, Selector: map[string]string{"r": "w"}}, nil},
		{"empty", Expect{}, []string{"nodes"}},
		{"both", Expect{Nodes: []string{"a"}, Count: 2}, []string{"nodes"}},
		{"bad id", Expect{Nodes: []string{"Bad!"}}, []string{"nodes"}},
		{"twice", Expect{Nodes: []string{"a", "a"}}, []string{"nodes"}},
		{"negative count", Expect{Count: -1}, []string{"count"}},
		{"selector alone", Expect{Selector: map[string]string{"r": "w"}}, []string{"count", "nodes"}},
		{"bad selector", Expect{Count: 1, Selector: map[string]string{"": "w"}}, []string{"selector"}},
		{"negative grace", Expect{Count: 1, Grace: -time.Second}, []string{"grace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.e.Validate(id, lab)
			var keys []string
			for _, k := range []string{"count", "grace", "nodes", "selector"} {
				if _, ok := got[k]; ok {
					keys = append(keys, k)
				}
			}
			if !reflect.DeepEqual(keys, tc.want) {
				t.Fatalf("fields %v (%v), want %v", keys, got, tc.want)
			}
		})
	}
}

// An on_alert block names a playbook, a version of it or none, and
// params that leave `missing` to the core.
func TestExpectValidatesOnAlert(t *testing.T) {
	t.Parallel()
	ok := func(string) error { return nil }
	okLabels := func(map[string]string) error { return nil }
	for _, tc := range []struct {
		a    OnAlert
		want string
	}{
		{OnAlert{Playbook: "heal"}, ""},
		{OnAlert{}, "on_alert.playbook"},
		{OnAlert{Playbook: "heal", Version: -1}, "on_alert.version"},
		{OnAlert{Playbook: "heal", Params: map[string]string{"missing": "x"}}, "on_alert.params"},
	} {
		e := Expect{Nodes: []string{"a"}, OnAlert: &tc.a}
		bad := e.Validate(ok, okLabels)
		if tc.want == "" && len(bad) > 0 || tc.want != "" && bad[tc.want] == "" {
			t.Errorf("%+v: %v, want %q", tc.a, bad, tc.want)
		}
	}
}
