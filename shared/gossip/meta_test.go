package gossip

import (
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/labels"
)

// An announced API address is a bare host:port (issue 9, item 1): a scheme
// would let a key holder choose plain HTTP past agents_tls, and a path or
// query would aim the core's requests anywhere on the target.
func TestGossipMetaAPIIsBareHostPort(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"10.0.0.1:7420", "[fd00::1]:7420", "db-1.example.com:7420", "localhost:1", "node.:65535"} {
		if _, err := DecodeMeta([]byte(`{"v":1,"role":"agent","node":"n","api":"` + ok + `"}`)); err != nil {
			t.Errorf("api %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"http://127.0.0.1:18080", "https://10.0.0.1:7420", "127.0.0.1:18080/internal/admin?q=",
		"127.0.0.1:18080?q=", "user@127.0.0.1:7420", "127.0.0.1:7420#x", "127.0.0.1", "127.0.0.1:0",
		"127.0.0.1:70000", "127.0.0.1:+80", "::1:7420", "[fe80::1%eth0]:7420", "[10.0.0.1]:7420",
		"exa mple:7420", "-x.example:7420", "a..b:7420", "\x1b[31m:7420", ":7420", strings.Repeat("a", 300) + ":1",
	} {
		b := []byte(`{"v":1,"role":"agent","node":"n","api":` + quote(bad) + `}`)
		if m, err := DecodeMeta(b); !errors.Is(err, ErrBadMeta) || !errors.Is(err, ErrBadAPIAddr) {
			t.Errorf("api %q: DecodeMeta = %+v, %v; want ErrBadAPIAddr", bad, m, err)
		}
		if _, err := EncodeMeta(Meta{Role: RoleAgent, Node: "n", API: bad}); !errors.Is(err, ErrBadAPIAddr) {
			t.Errorf("api %q: EncodeMeta = %v; want ErrBadAPIAddr", bad, err)
		}
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzDecodeMeta: whatever a member announces, DecodeMeta answers an error
// or metadata with a version, a role and a bare host:port API, which
// encodes and decodes to itself.
func FuzzDecodeMeta(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"role":"agent","cluster":"c1","node":"node-2","api":"127.0.0.1:7421"}`,
		`{"v":1,"role":"agent","cluster":"c1","node":"node-2","api":"http://127.0.0.1:18080"}`,
		`{"v":1,"role":"agent","node":"n","api":"127.0.0.1:18080/internal/admin?q="}`,
		`{"v":1,"role":"core","api":"[::1]:7410"}`,
		`{"v":7,"role":"agent","node":"n","zone":"eu-1","caps":[1,2]}`,
		`{"v":1,"role":"agent","api":"user:pw@host:1"}`,
		`{"v":0}`, `null`, `[]`, ``, "\x82\xa1v\x01", `{"v":1e400}`,
		`{"v":1,"role":"agent","node":"n","api":"127.0.0.1:1","labels":{"role":"replica"}}`,
		`{"v":1,"role":"agent","labels":{"a b":"c"}}`, `{"v":1,"role":"agent","labels":{"role":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if !reflect.DeepEqual(m, Meta{}) {
				t.Fatalf("an error with metadata %+v", m)
			}
			return
		}
		if m.V < 1 || m.Role == "" {
			t.Fatalf("accepted %+v", m)
		}
		if m.API != "" && ValidateAPIAddr(m.API) != nil {
			t.Fatalf("accepted api %q", m.API)
		}
		if strings.ContainsAny(m.API, "/?#@ ") {
			t.Fatalf("accepted api %q", m.API)
		}
		if len(m.Labels) > labels.MaxLabels || m.Labels.Validate() != nil {
			t.Fatalf("accepted labels beyond bounds: %v", m.Labels)
		}
		enc, err := EncodeMeta(m)
		if err != nil {
			if errors.Is(err, ErrMetaTooLarge) {
				return // unknown fields dropped, yet escapes may grow it
			}
			t.Fatalf("EncodeMeta(%+v): %v", m, err)
		}
		back, err := DecodeMeta(enc)
		m.V = MetaVersion
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, m)
		}
	})
}

// RefuseInternal sees the address dialled after name resolution (issue 9,
// item 6): a name that resolves to loopback is refused like the address.
func TestGossipRefusesLoopbackAddrsAfterResolution(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := &net.Dialer{Control: RefuseInternal}
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		c, err := d.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrInternalAddr) {
			t.Errorf("dial %s: %v, want ErrInternalAddr", addr, err)
		}
	}
	if c, err := (&net.Dialer{}).Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatalf("without the control: %v", err)
	} else {
		c.Close()
	}
}

// Issue 30, item 6: a zone does not hide a loopback or link-local
// address, whether announced or dialled.
func TestZonedAddressesAreInternal(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"::1%lo", "fe80::1%eth0", "fe80::1%", "127.0.0.1", "127.0.0.1%lo", "::ffff:127.0.0.1%lo", "localhost", "LocalHost.", "a.localhost", "::"} {
		if !InternalHost(host) {
			t.Errorf("InternalHost(%q) = false", host)
		}
		if addr := net.JoinHostPort(host, "80"); !InternalAddr(addr) {
			t.Errorf("InternalAddr(%q) = false", addr)
		}
		if err := RefuseInternal("tcp", net.JoinHostPort(host, "80"), nil); !errors.Is(err, ErrInternalAddr) && host != "localhost" && host != "LocalHost." && host != "a.localhost" {
			t.Errorf("RefuseInternal(%q) = %v", host, err)
		}
	}
	for _, host := range []string{"2001:db8::1%eth0", "192.0.2.1", "hooks.example.com", "fd00::2"} {
		if InternalHost(host) {
			t.Errorf("InternalHost(%q) = true", host)
		}
	}
}
