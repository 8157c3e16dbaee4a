package gossip

import (
	"encoding/json"
	"errors"
	"fmt"

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
)

// Meta is what a member announces about itself: compact JSON of at most
// MaxMetaSize bytes.
type Meta struct {
	V       int    `json:"v"`
	Role    string `json:"role"`
	Cluster string `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	// API is the address the core reaches an agent's API at (host:port or
	// an http(s) URL).
	API string `json:"api,omitempty"`
	// Labels are the agent's own labels (DESIGN.md §9), within the bounds
	// of package labels; the whole record must still fit MaxMetaSize.
	Labels labels.Set `json:"labels,omitempty"`
}

// EncodeMeta returns the wire form of m, with V set to MetaVersion.
func EncodeMeta(m Meta) ([]byte, error) {
	m.V = MetaVersion
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
// over MaxMetaSize, and labels beyond the bounds of package labels are
// errors.
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
	if err := m.Labels.Validate(); err != nil {
		return Meta{}, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	return m, nil
}
