// Package tlsutil is muster's small certificate authority and the TLS
// settings of its endpoints.
//
// Every certificate muster issues names exactly one identity, as its common
// name and as a URI SAN that peers check:
//
//	spiffe://muster/agent/NODE_ID   an agent (server certificate of its API)
//	spiffe://muster/core            the core (its API's server certificate,
//	                                and its client certificate towards agents)
//	spiffe://muster/client/NAME     a person or a script (client certificate
//	                                towards the core API)
//
// An agent that requires client certificates accepts only the core's
// identity; the core accepts an agent's certificate only when it names the
// node it expects at that address. Host names are not what is checked
// between core and agents: the identity is (as Consul and Nomad check a role
// name rather than an address), so an address announced through gossip
// cannot be answered by another machine holding a certificate of the same CA.
package tlsutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/musterhq/muster/shared/names"
)

// TrustDomain is the host part of every identity URI.
const TrustDomain = "muster"

// Roles of an identity.
const (
	RoleAgent  = "agent"
	RoleCore   = "core"
	RoleClient = "client"
)

// Errors of identity checks.
var (
	// ErrIdentityMismatch: the peer's certificate does not name the identity
	// expected (or names none).
	ErrIdentityMismatch = errors.New("identity mismatch")
	// ErrBadName: a node or client name is not usable in a certificate.
	ErrBadName = errors.New("bad name")
)

// Identity is who a certificate speaks for. Name is empty for the core.
type Identity struct {
	Role string
	Name string
}

// Agent, Core and Client build identities.
func Agent(nodeID string) Identity { return Identity{Role: RoleAgent, Name: nodeID} }
func Core() Identity               { return Identity{Role: RoleCore} }
func Client(name string) Identity  { return Identity{Role: RoleClient, Name: name} }

// URI is the identity's URI SAN.
func (i Identity) URI() *url.URL {
	p := "/" + i.Role
	if i.Name != "" {
		p += "/" + i.Name
	}
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: p}
}

func (i Identity) String() string {
	if i.Role == "" {
		return "no muster identity"
	}
	return i.URI().String()
}

// CommonName is the certificate's subject common name.
func (i Identity) CommonName() string {
	if i.Name == "" {
		return i.Role
	}
	return i.Role + "." + i.Name
}

// FileBase is the name of the certificate file without ".pem":
// agent-NODE_ID, core or client-NAME.
func (i Identity) FileBase() string {
	if i.Name == "" {
		return i.Role
	}
	return i.Role + "-" + i.Name
}

// Validate checks the role and that the name is an id as cluster and node
// ids are (shared/names), present unless core.
func (i Identity) Validate() error {
	switch i.Role {
	case RoleCore:
		if i.Name != "" {
			return fmt.Errorf("%w: the core identity has no name", ErrBadName)
		}
		return nil
	case RoleAgent, RoleClient:
	default:
		return fmt.Errorf("%w: role %q is not agent, core or client", ErrBadName, i.Role)
	}
	if err := names.CheckID(i.Name); err != nil {
		return fmt.Errorf("%w: %s name: %w", ErrBadName, i.Role, err)
	}
	return nil
}

// IdentityOf returns the muster identity a certificate names: its one
// spiffe://muster/... URI SAN. A certificate with none, or more than one,
// has no identity (the zero Identity and ok false).
func IdentityOf(cert *x509.Certificate) (Identity, bool) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
		var id Identity
		switch {
		case len(parts) == 1 && parts[0] == RoleCore:
			id = Core()
		case len(parts) == 2 && (parts[0] == RoleAgent || parts[0] == RoleClient):
			id = Identity{Role: parts[0], Name: parts[1]}
		default:
			return Identity{}, false
		}
		if id.Validate() != nil || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Identity{}, false
		}
		found = append(found, id)
	}
	if len(found) != 1 {
		return Identity{}, false
	}
	return found[0], true
}

// IdentityError says which identity a peer presented instead of the one
// expected. It matches ErrIdentityMismatch.
type IdentityError struct {
	Got, Want Identity
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("identity mismatch: the peer's certificate is %s, want %s", e.Got, e.Want)
}

// Is makes errors.Is(err, ErrIdentityMismatch) true.
func (e *IdentityError) Is(target error) bool { return target == ErrIdentityMismatch }

// CheckIdentity returns an *IdentityError unless cert names want.
func CheckIdentity(cert *x509.Certificate, want Identity) error {
	got, ok := IdentityOf(cert)
	if !ok || got != want {
		return &IdentityError{Got: got, Want: want}
	}
	return nil
}
