package target

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/core/store"
)

var cluster = []store.Node{
	{ID: "db-3", Labels: map[string]string{"role": "replica", "zone": "b"}},
	{ID: "db-1", Labels: map[string]string{"role": "primary", "zone": "a"}},
	{ID: "db-2", Labels: map[string]string{"role": "replica", "zone": "a"}},
	{ID: "web-1"},
}

func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"nodes": ["db-2", "db-1"]}`, []string{"db-1", "db-2"}},
		{`{"nodes": ["db-2", "db-1", "db-2"]}`, []string{"db-1", "db-2"}}, // once each
		{`{"labels": {"role": "replica"}}`, []string{"db-2", "db-3"}},
		{`{"labels": {"role": "replica", "zone": "a"}}`, []string{"db-2"}},
		{`{"all": true}`, []string{"db-1", "db-2", "db-3", "web-1"}},
	} {
		tg, err := Decode([]byte(tc.in))
		if err != nil {
			t.Fatalf("Decode(%s): %v", tc.in, err)
		}
		got, err := Resolve(tg, cluster)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s resolves to %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestResolveErrorsSayWhich(t *testing.T) {
	t.Parallel()
	_, err := Resolve(Nodes("db-1", "db-9", "db-0"), cluster)
	if !errors.Is(err, ErrUnknownNode) || err.Error() != "unknown node(s) db-0, db-9" {
		t.Errorf("unknown nodes: %v", err)
	}
	_, err = Resolve(Labels(map[string]string{"role": "witness"}), cluster)
	if !errors.Is(err, ErrNoMatch) || err.Error() != "no node has the labels role=witness" {
		t.Errorf("selector matching nothing: %v", err)
	}
	if _, err = Resolve(All(), nil); !errors.Is(err, ErrNoMatch) {
		t.Errorf("all of an empty cluster: %v", err)
	}
	if _, err = Resolve(Target{}, cluster); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty target: %v", err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, `null`, ``, `[]`, `{"nodes": []}`, `{"labels": {}}`, `{"all": false}`,
		`{"nodes": ["a"], "all": true}`, `{"labels": {"a": "b"}, "nodes": ["a"]}`,
		`{"nodes": ["a b"]}`, `{"nodes": [""]}`, `{"labels": {"a": ""}}`,
		`{"labels": {"a b": "c"}}`, `{"node": ["a"]}`, `{"all": true} {"all": true}`, `{"all": "yes"}`,
		`{"nodes": "a"}`,
	} {
		if tg, err := Decode([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%s) = %+v, %v; want ErrInvalid", in, tg, err)
		}
	}
	if err := Check(Target{Nodes: []string{"a"}, All: true}); !errors.Is(err, ErrInvalid) {
		t.Errorf("two forms: %v", err)
	}
}

func TestParseAndString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Target{
		"all":                   All(),
		"nodes=db-1,db-2":       Nodes("db-1", "db-2"),
		"node=db-1":             Nodes("db-1"),
		"role=replica":          Labels(map[string]string{"role": "replica"}),
		"role=replica,zone=eu1": Labels(map[string]string{"role": "replica", "zone": "eu1"}),
	} {
		got, err := Parse(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		again, err := Parse(String(got))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("Parse(%q) reads back as %+v, %v", String(got), again, err)
		}
	}
	for _, in := range []string{"", "allx", "nodes=", "nodes=a,,b", "role", "role=a,role=b"} {
		if tg, err := Parse(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrInvalid", in, tg, err)
		}
	}
}

// FuzzDecode checks that no input makes Decode panic, that what it accepts
// has exactly one valid form, survives a JSON round trip, and resolves
// without panicking.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"nodes":["db-1","db-2"]}`, `{"labels":{"role":"replica"}}`, `{"all":true}`, `{"all":false}`,
		`{}`, `{"nodes":["a"],"all":true}`, `{"labels":{"":"x"}}`, `null`, `{"nodes":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tg, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%q): error %v is not ErrInvalid", b, err)
			}
			return
		}
		if err := Check(tg); err != nil {
			t.Fatalf("Decode(%q) accepted %+v that Check refuses: %v", b, tg, err)
		}
		out, err := json.Marshal(tg)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(out)
		if err != nil || !reflect.DeepEqual(again, tg) {
			t.Fatalf("round trip of %+v: %s → %+v, %v", tg, out, again, err)
		}
		if ids, err := Resolve(tg, cluster); err == nil && len(ids) == 0 {
			t.Fatalf("%+v resolved to no node without an error", tg)
		}
	})
}

// A limit keeps the nodes some pattern picks (an id, or a glob over ids);
// a pattern that picks no node of the cluster, or cannot be read, is an
// error that names it.
func TestLimit(t *testing.T) {
	t.Parallel()
	ids := []string{"db-1", "db-2", "db-3", "web-1"}
	for _, c := range []struct {
		limit []string
		want  []string
	}{
		{nil, ids},
		{[]string{"db-2"}, []string{"db-2"}},
		{[]string{"db-*"}, []string{"db-1", "db-2", "db-3"}},
		{[]string{"web-1", "db-{1,3}"}, []string{"db-1", "db-3", "web-1"}},
	} {
		if err := CheckLimit(c.limit, cluster); err != nil {
			t.Errorf("CheckLimit(%v) = %v", c.limit, err)
		}
		if got := Limit(ids, c.limit); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Limit(%v) = %v, want %v", c.limit, got, c.want)
		}
	}
	for _, c := range []struct {
		limit []string
		kind  error
	}{
		{[]string{"db-1", "nosuch"}, ErrUnknownNode},
		{[]string{"cache-*"}, ErrUnknownNode},
		{[]string{"db-[1"}, ErrInvalid},
		{[]string{""}, ErrInvalid},
	} {
		if err := CheckLimit(c.limit, cluster); !errors.Is(err, c.kind) {
			t.Errorf("CheckLimit(%q) = %v, want %v", c.limit, err, c.kind)
		}
	}
}

// FuzzLimit: whatever patterns a request carries, CheckLimit answers
// without panicking, and a limit it accepts keeps, of the cluster's nodes,
// at least one, and only nodes a pattern matches.
func FuzzLimit(f *testing.F) {
	for _, s := range []string{"db-1", "db-*", "web-1,db-{1,3}", "db-[1", "**", "", ",", "a\\", "{a,{b,c}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		limit := strings.Split(s, ",")
		err := CheckLimit(limit, cluster)
		if err != nil {
			return
		}
		ids := make([]string, 0, len(cluster))
		for _, n := range cluster {
			ids = append(ids, n.ID)
		}
		kept := Limit(ids, limit)
		if len(kept) == 0 {
			t.Fatalf("CheckLimit accepted %q, which keeps no node", limit)
		}
		for _, id := range kept {
			if !slices.ContainsFunc(limit, func(p string) bool { return glob.Match(p, id) }) {
				t.Fatalf("Limit(%q) kept %s, which no pattern matches", limit, id)
			}
		}
	})
}
