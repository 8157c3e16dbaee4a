package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/memberlist"

	"github.com/musterhq/muster/shared/labels"
)

// MetaVersion is the version of the metadata this build writes. A reader
// accepts any version from 1 up, ignoring fields it does not know, so that
// a newer agent can join an older core.
const MetaVersion = 1

// Roles a member announces.
const (
	RoleAgent = "agent"
	RoleCore  = "core"
)

// MaxMetaSize is memberlist's limit on a member's metadata.
const MaxMetaSize = memberlist.MetaMaxSize

// Errors of the metadata codec.
var (
	ErrMetaTooLarge = errors.New("gossip metadata too large")
	ErrBadMeta      = errors.New("bad gossip metadata")
	// ErrBadAPIAddr: an announced API address is not a bare host:port.
	ErrBadAPIAddr = errors.New("bad API address")
)

// Meta is what a member announces about itself: compact JSON of at most
// MaxMetaSize bytes.
type Meta struct {
	V       int    `json:"v"`
	Role    string `json:"role"`
	Cluster string `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	// API is the address the core reaches an agent's API at: a bare
	// host:port (ValidateAPIAddr). The scheme is never the announcer's
	// choice: the core decides it (https with agents_tls).
	API string `json:"api,omitempty"`
	// Leave is the commitment of the member's leave intent: the digest of
	// a secret only the member knows, which its intent reveals (set by New).
	Leave string `json:"leave,omitempty"`
	// Labels are the agent's own labels (docs/architecture.md, "Labels, targets
	// and the disruption budget"), within the bounds of package labels; the whole
	// record must still fit MaxMetaSize.
	Labels labels.Set `json:"labels,omitempty"`
}

// EncodeMeta returns the wire form of m, with V set to MetaVersion.
func EncodeMeta(m Meta) ([]byte, error) {
	m.V = MetaVersion
	if m.API != "" {
		if err := ValidateAPIAddr(m.API); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMeta, err)
		}
	}
	if err := m.Labels.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrMetaTooLarge, len(b), MaxMetaSize)
	}
	return b, nil
}

// DecodeMeta reads metadata written by EncodeMeta of this or a later
// version. Unknown fields are ignored; a missing version or role, a record
// over MaxMetaSize, an API address that is not a bare host:port, and labels
// beyond the bounds of package labels are errors.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) > MaxMetaSize {
		return Meta{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrMetaTooLarge, len(b), MaxMetaSize)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	if m.V < 1 {
		return Meta{}, fmt.Errorf("%w: version %d", ErrBadMeta, m.V)
	}
	if m.Role == "" {
		return Meta{}, fmt.Errorf("%w: no role", ErrBadMeta)
	}
	if m.API != "" {
		if err := ValidateAPIAddr(m.API); err != nil {
			return Meta{}, fmt.Errorf("%w: %w", ErrBadMeta, err)
		}
	}
	if err := m.Labels.Validate(); err != nil {
		return Meta{}, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	return m, nil
}

// ValidateAPIAddr accepts a bare host:port: an IP address (IPv6 in
// brackets) or a DNS name, and a port from 1 to 65535. A scheme, path,
// query, fragment, user info, zone or any other character is refused, so
// that an announcement can name a place to connect to and nothing else.
func ValidateAPIAddr(addr string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrBadAPIAddr, addr, why) }
	if len(addr) > 262 { // a 253-byte name, ':' and a port
		return bad("too long")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("not host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return bad("the port is not a number from 1 to 65535")
	}
	if strings.HasPrefix(addr, "[") {
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return bad("not an IPv6 address in brackets")
		}
		return nil
	}
	if net.ParseIP(host) != nil {
		if strings.Contains(host, ":") {
			return bad("an IPv6 address needs brackets")
		}
		return nil
	}
	if !validHostName(host) {
		return bad("the host is not an IP address or a DNS name")
	}
	return nil
}

// validHostName accepts a DNS name: dot-separated labels of letters, digits
// and '-', each 1 to 63 bytes, not starting or ending with '-'.
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// InternalAddr reports whether the host of a host:port API address is
// InternalHost: an address a gossip announcement may not point a core at
// unless it allows them. A host name is not resolved here: InternalIP
// checks the address actually dialled.
func InternalAddr(api string) bool {
	host, _, err := net.SplitHostPort(api)
	if err != nil {
		return false
	}
	return InternalHost(host)
}

// InternalHost reports whether host (an IP literal or a name, without
// brackets) is on loopback, link-local, or the unspecified address (which
// reaches the local host), or is named localhost. An IPv6 zone (fe80::1%eth0,
// ::1%lo) is stripped first: it does not change what the address reaches.
// It is the one check of every address muster refuses to reach unless told
// (gossip announcements, notification URLs, the dialler's control).
func InternalHost(host string) bool {
	if ip, ok := hostIP(host); ok {
		return InternalIP(ip)
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// hostIP reads an IP literal, with or without a zone. An IPv4 address may
// carry one too: the dialler shows an IPv4-mapped literal with a zone
// ([::ffff:127.0.0.1%lo]) as 127.0.0.1%lo to its control. No host name
// holds a %.
func hostIP(host string) (net.IP, bool) {
	if ip := net.ParseIP(host); ip != nil {
		return ip, true
	}
	if addr, _, ok := strings.Cut(host, "%"); ok {
		if ip := net.ParseIP(addr); ip != nil {
			return ip, true
		}
	}
	return nil, false
}

// ErrInternalAddr: an address announced through gossip resolved to a
// loopback, link-local or unspecified IP, which RefuseInternal refuses.
var ErrInternalAddr = errors.New("refused to dial a loopback or link-local address announced through gossip")

// RefuseInternal is a net.Dialer Control that refuses InternalIP
// addresses: it sees the address actually dialled, after name resolution.
func RefuseInternal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip, ok := hostIP(host); ok && InternalIP(ip) {
		return fmt.Errorf("%w: %s", ErrInternalAddr, address)
	}
	return nil
}

// InternalIP reports whether ip is loopback, link-local or unspecified.
func InternalIP(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified()
}
