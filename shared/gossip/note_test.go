package gossip

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/testwait"
)

func TestMetaCarriesLabels(t *testing.T) {
	t.Parallel()
	in := Meta{Role: RoleAgent, Cluster: "db", Node: "db-1", API: "10.0.0.1:7420",
		Labels: labels.Set{"role": "replica", "zone": "eu-1"}}
	b, err := EncodeMeta(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeMeta(b)
	in.V = MetaVersion
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("DecodeMeta(%s) = %+v, %v", b, out, err)
	}
}

func TestDecodeMetaRefusesBadLabels(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range labels.MaxLabels + 1 {
		many[string(rune('a'+i))] = "v"
	}
	manyJSON := `{"v":1,"role":"agent","labels":{`
	first := true
	for _, k := range slices.Sorted(maps.Keys(many)) {
		if !first {
			manyJSON += ","
		}
		first = false
		manyJSON += `"` + k + `":"v"`
	}
	manyJSON += "}}"
	for name, in := range map[string]string{
		"bad key":        `{"v":1,"role":"agent","labels":{"ro le":"x"}}`,
		"empty value":    `{"v":1,"role":"agent","labels":{"role":""}}`,
		"long value":     `{"v":1,"role":"agent","labels":{"role":"` + strings.Repeat("x", labels.MaxValueLen+1) + `"}}`,
		"too many":       manyJSON,
		"not a map":      `{"v":1,"role":"agent","labels":["role"]}`,
		"nested value":   `{"v":1,"role":"agent","labels":{"role":{"a":"b"}}}`,
		"escape in name": `{"v":1,"role":"agent","labels":{"<b>":"x"}}`,
	} {
		if m, err := DecodeMeta([]byte(in)); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: DecodeMeta = %+v, %v; want ErrBadMeta", name, m, err)
		}
	}
	if _, err := DecodeMeta([]byte(`{"v":1,"role":"agent","pad":"` + strings.Repeat("x", MaxMetaSize) + `"}`)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversize: err %v, want ErrMetaTooLarge", err)
	}
	if _, err := EncodeMeta(Meta{Role: RoleAgent, Labels: labels.Set{"ro le": "x"}}); !errors.Is(err, ErrBadMeta) {
		t.Errorf("EncodeMeta with a bad label: err %v", err)
	}
}

func TestNotes(t *testing.T) {
	t.Parallel()
	for _, n := range []Note{{Leaving: "c/n@127.0.0.1:1"}, {Changed: &NodeRef{Cluster: "db", Node: "db-1"}}} {
		b, err := EncodeNote(n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeNote(b)
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("DecodeNote(%s) = %+v, %v", b, got, err)
		}
	}
	for _, bad := range []string{``, `{}`, `[]`, `{"changed":{"cluster":"db"}}`, `{"changed":{"cluster":"d b","node":"n"}}`,
		`{"leaving":"x","changed":{"cluster":"c","node":"n"}}`, `{"leaving":"` + strings.Repeat("x", MaxNoteSize) + `"}`} {
		if n, err := DecodeNote([]byte(bad)); !errors.Is(err, ErrBadMeta) {
			t.Errorf("DecodeNote(%.40q) = %+v, %v; want ErrBadMeta", bad, n, err)
		}
	}
}

// TestTellReachesTheCore sends a "changed" note from an agent to the core
// over a real pool and sees it delivered as a KindChanged event.
func TestTellReachesTheCore(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	var rec recorder
	core := member(t, "seed", key, nil, rec.handle)
	agent := member(t, "tell-a", key, []string{core.Addr()}, nil)
	testwait.Within(t, 10*time.Second, "the agent to see the core", func() bool { return rec.has(KindJoin, "tell-a") })
	testwait.Within(t, 10*time.Second, "the note to arrive", func() bool {
		agent.Tell(RoleCore, Note{Changed: &NodeRef{Cluster: "c", Node: "tell-a"}})
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, ev := range rec.evs {
			if ev.Kind == KindChanged && ev.Meta.Cluster == "c" && ev.Meta.Node == "tell-a" {
				return true
			}
		}
		return false
	})
	if n := agent.Tell(RoleAgent, Note{Changed: &NodeRef{Cluster: "c", Node: "tell-a"}}); n != 0 {
		t.Fatalf("a note to agents reached %d members; there are none but this one", n)
	}
}

// FuzzDecodeNote checks that no input makes the note codec panic and that
// an accepted note has exactly one valid content.
func FuzzDecodeNote(f *testing.F) {
	for _, s := range []string{`{"leaving":"a"}`, `{"changed":{"cluster":"c","node":"n"}}`, `{}`, `{"changed":null}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeNote(b)
		if err != nil {
			return
		}
		if (n.Leaving == "") == (n.Changed == nil) {
			t.Fatalf("accepted %q with %+v", b, n)
		}
		if n.Changed != nil && (!validID(n.Changed.Cluster) || !validID(n.Changed.Node)) {
			t.Fatalf("accepted bad names: %+v", n.Changed)
		}
	})
}
