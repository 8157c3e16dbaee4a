package api

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// The routes an agent calls before it has a certificate.
const (
	enrollCAPath = "/api/v1/enroll/ca"
	enrollPath   = "/api/v1/enroll"
)

// WithoutClientCert reports whether r is one of the two requests an agent
// makes before it has a certificate (GET the CA bundle, POST its
// enrollment): the only ones a listener that requires client certificates
// (api.tls.client_ca_file) lets through without one. Only the exact
// paths count: any other spelling needs a certificate.
func WithoutClientCert(r *http.Request) bool {
	if r.URL.RawPath != "" {
		return false
	}
	switch r.URL.Path {
	case enrollCAPath:
		return r.Method == http.MethodGet
	case enrollPath:
		return r.Method == http.MethodPost
	}
	return false
}

// enrollCA serves the CA bundle (public: an enrolling agent checks it
// against the pin it was given before it sends its join token).
func (s *Server) enrollCA(c *echo.Context) error {
	bundle, err := s.ops.EnrollCA()
	if err != nil {
		return err
	}
	out := wire.EnrollCA{CABundle: string(bundle), Pins: []string{}}
	certs, err := tlsutil.ParseCerts(bundle)
	if err != nil {
		return fmt.Errorf("agents_ca bundle: %w", err)
	}
	for _, ca := range certs {
		out.Pins = append(out.Pins, tlsutil.Pin(ca))
	}
	return c.JSON(http.StatusOK, out)
}

// decodeEnroll decodes the body of POST /api/v1/enroll.
func decodeEnroll(body []byte) (*wire.EnrollRequest, error) {
	var req wire.EnrollRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.NodeID == "" || req.ClusterID == "" || req.CSR == "" {
		return nil, badRequest("node_id, cluster_id and csr are required")
	}
	if len(req.CSR) > maxCSR {
		return nil, badRequest("csr is longer than %d bytes", maxCSR)
	}
	return &req, nil
}

// maxCSR bounds a signing request (a P-256 one is under 600 bytes).
const maxCSR = 16 << 10

// enrollAgent signs an agent's CSR for a join token (201). It
// authenticates the token itself, so that an expired, used-up or
// wrong-cluster token is refused with its reason and an event.
func (s *Server) enrollAgent(c *echo.Context) error {
	if _, err := s.ops.EnrollCA(); err != nil {
		return err // enrollment is off: 404 before anything is read
	}
	h := c.Request().Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return fmt.Errorf("%w: enrollment needs a join token (Authorization: Bearer <token>)", auth.ErrUnauthenticated)
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeEnroll(body)
	if err != nil {
		return err
	}
	out, err := s.ops.EnrollAgent(c.Request().Context(), strings.TrimSpace(secret), *req, clientAddr(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

// renewAgent signs a new CSR for the agent whose client certificate the
// connection carries (201).
func (s *Server) renewAgent(c *echo.Context) error {
	if _, err := s.ops.EnrollCA(); err != nil {
		return err // enrollment is off: 404 before anything is read
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req wire.RenewRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.CSR == "" || len(req.CSR) > maxCSR {
		return badRequest("csr is required, at most %d bytes", maxCSR)
	}
	var peer []*x509.Certificate
	if cs := c.Request().TLS; cs != nil {
		peer = cs.PeerCertificates
	}
	out, err := s.ops.RenewAgent(c.Request().Context(), peer, req, clientAddr(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

// revokeNode puts a node's certificates on the revocation list (200) and
// syncs the node at once, so that it shows DOWN and revoked.
func (s *Server) revokeNode(c *echo.Context) error {
	var req wire.RevokeRequest
	if c.Request().ContentLength != 0 {
		body, err := readBody(c)
		if err != nil {
			return err
		}
		if len(body) > 0 {
			if err := decodeStrict(body, &req); err != nil {
				return err
			}
		}
	}
	cluster, node := c.Param("cluster"), c.Param("node")
	serials, err := s.ops.RevokeNode(c.Request().Context(), who(c), cluster, node, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.RevokeResult{ClusterID: cluster, NodeID: node, Serials: serials})
}

// withRevocations marks the revoked nodes of out.
func withRevocations(nodes []wire.Node, revoked map[string]store.AgentCert) {
	for i := range nodes {
		if rc, ok := revoked[nodes[i].ClusterID+"/"+nodes[i].ID]; ok {
			nodes[i].Revoked, nodes[i].RevokeReason = true, rc.RevokeReason
		}
	}
}
