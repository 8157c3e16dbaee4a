package sso

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// MinKeyRefresh is the least time between two fetches of the provider's
// keys: a token that names a key the core does not know (a rotation, or a
// forgery) fetches them again, but a flood of forged tokens does not become
// a flood of requests to the provider.
const MinKeyRefresh = 30 * time.Second

// maxKeySet bounds the provider's key set document.
const maxKeySet = 1 << 20

// keySet is the provider's signing keys (oidc.KeySet), fetched at first use
// and again, at most once per MinKeyRefresh, when a signature does not
// verify with the keys held.
type keySet struct {
	url string
	hc  *http.Client
	now func() time.Time

	mu      sync.Mutex
	keys    *oidc.StaticKeySet
	fetched time.Time
}

var _ oidc.KeySet = (*keySet)(nil)

// VerifySignature is oidc.KeySet's.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	k.mu.Lock()
	held := k.keys
	k.mu.Unlock()
	if held != nil {
		if payload, err := held.VerifySignature(ctx, jwt); err == nil {
			return payload, nil
		}
	}
	keys, err := k.refresh(ctx)
	if err != nil {
		return nil, err
	}
	return keys.VerifySignature(ctx, jwt)
}

// refresh fetches the keys, unless they were fetched less than
// MinKeyRefresh ago.
func (k *keySet) refresh(ctx context.Context) (*oidc.StaticKeySet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys != nil && k.now().Sub(k.fetched) < MinKeyRefresh {
		return k.keys, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the provider's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the provider's keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxKeySet)).Decode(&set); err != nil {
		return nil, fmt.Errorf("the provider's keys: %w", err)
	}
	keys := &oidc.StaticKeySet{}
	for _, key := range set.Keys {
		if key.Use == "" || key.Use == "sig" {
			keys.PublicKeys = append(keys.PublicKeys, crypto.PublicKey(key.Key))
		}
	}
	k.keys, k.fetched = keys, k.now()
	return keys, nil
}
