package core

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/shared/tlsutil"
)

// TestGossipClaimOfAnotherClustersAgentIsRefused: an agent enrolled as
// web-1 of cluster dev does not prove a claim of prod/web-1 (a ClaimError
// naming both clusters); it proves dev/web-1.
func TestGossipClaimOfAnotherClustersAgentIsRefused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, keyPEM, err := tlsutil.NewAgentCSR("web-1")
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := tlsutil.ParseAgentCSR(csrPEM, "web-1")
	certPEM, _, err := ca.SignAgent(csr, "web-1", "dev", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	atls, _, err := agentsTLS(AgentsTLSConfig{CAFile: filepath.Join(dir, tlsutil.CACertFile)})
	if err != nil {
		t.Fatal(err)
	}
	verify := verifyClaim(atls, nil, 5*time.Second)
	err = verify(t.Context(), "prod", "web-1", ln.Addr().String())
	var ce *discovery.ClaimError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "cluster dev, not prod") {
		t.Fatalf("prod/web-1 claimed by dev's web-1: %v, want a claim error naming both clusters", err)
	}
	if err := verify(t.Context(), "dev", "web-1", ln.Addr().String()); err != nil {
		t.Fatalf("dev/web-1: %v", err)
	}
}
