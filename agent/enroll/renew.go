package enroll

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Renewer renews the agent's certificate at two thirds of its lifetime,
// over mutual TLS with the certificate in use, and reloads the pair the
// agent serves, so that no restart is needed. A failed renewal is tried
// again, ever sooner, until the certificate expires (then only enrolling
// again helps).
type Renewer struct {
	Core  string
	Node  string
	Paths Paths
	// Pair is the agent's certificate in use; the renewer reloads it.
	Pair *tlsutil.KeyPair
	Log  *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	renewed atomic.Int64
	*startstop.Func
}

// NewRenewer returns the renewer of an enrolled agent; Start runs it.
func NewRenewer(core, node string, p Paths, pair *tlsutil.KeyPair, log *slog.Logger) *Renewer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Renewer{Core: core, Node: node, Paths: p, Pair: pair, Log: log, Now: time.Now}
	r.Func = startstop.NewFunc(r.run)
	return r
}

// Renewed counts the renewals done since start.
func (r *Renewer) Renewed() int64 { return r.renewed.Load() }

func (r *Renewer) run(ctx context.Context) {
	failures, refused := 0, false
	for {
		leaf := r.Pair.Leaf()
		wait := tlsutil.RenewAt(leaf).Sub(r.Now())
		switch {
		case refused:
			// The core said no (revoked, expired): asking every minute
			// would only fill its event log. Enrolling again is the way.
			wait = time.Hour
		case failures > 0:
			// Ever sooner: a tenth of what is left, at least a second.
			wait = max(min(time.Minute, leaf.NotAfter.Sub(r.Now())/10), time.Second)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := r.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			status := client.StatusOf(err)
			refused = status == http.StatusUnauthorized || status == http.StatusForbidden
			if refused {
				r.Log.Error("certificate renewal refused by the core; enroll again with a join token", "err", err,
					"not_after", leaf.NotAfter)
			} else {
				r.Log.Error("certificate renewal failed; trying again", "err", err, "not_after", leaf.NotAfter, "attempt", failures)
			}
			continue
		}
		failures, refused = 0, false
	}
}

// Renew renews the certificate now.
func (r *Renewer) Renew(ctx context.Context) error {
	pool, err := tlsutil.CertPool(r.Paths.CA)
	if err != nil {
		return fmt.Errorf("CA bundle: %w", err)
	}
	tc := tlsutil.ForPeer(&tls.Config{RootCAs: pool, MinVersion: tlsutil.MinVersion}, tlsutil.Core())
	tc.GetClientCertificate = r.Pair.GetClientCertificate
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: 30 * time.Second}
	csrPEM, keyPEM, err := tlsutil.NewAgentCSR(r.Node)
	if err != nil {
		return err
	}
	resp, err := client.NewCore(r.Core, "", hc).Renew(ctx, wire.RenewRequest{CSR: string(csrPEM)})
	if err != nil {
		return err
	}
	if err := check(resp, keyPEM, r.Node); err != nil {
		return err
	}
	// Both staged, then moved in: a crash between leaves what Recover
	// completes at the next start, never a key and a certificate that do
	// not match.
	if err := stagePair(r.Paths, keyPEM, []byte(resp.Certificate)); err != nil {
		return err
	}
	if err := commitPair(r.Paths); err != nil {
		return err
	}
	if err := tlsutil.WriteFileAtomic(r.Paths.CA, []byte(resp.CABundle), 0o600); err != nil {
		return err
	}
	if st, err := ReadState(r.Paths); err == nil {
		st.Serial, st.NotAfter = resp.Serial, resp.NotAfter
		if b, err := json.MarshalIndent(st, "", "  "); err == nil {
			_ = tlsutil.WriteFileAtomic(r.Paths.State, append(b, '\n'), 0o600)
		}
	}
	if err := r.Pair.Reload(); err != nil {
		return fmt.Errorf("load the renewed certificate: %w", err)
	}
	r.renewed.Add(1)
	r.Log.Info("certificate renewed", "serial", resp.Serial, "not_after", resp.NotAfter)
	return nil
}
