package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func setup(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestCanTable(t *testing.T) {
	t.Parallel()
	want := map[string][]auth.Permission{
		store.RoleEnroll:   {auth.Enroll},
		store.RoleViewer:   {auth.Read},
		store.RoleOperator: {auth.Read, auth.Create, auth.Cancel, auth.Retry, auth.Orchestrate, auth.Drain, auth.Continue, auth.Freeze},
		store.RoleApprover: {auth.Read, auth.Approve, auth.Reject, auth.Continue, auth.Freeze, auth.Unfreeze},
		store.RoleAdmin:    auth.Permissions,
	}
	for _, role := range auth.Roles {
		for _, p := range auth.Permissions {
			allowed := false
			for _, q := range want[role] {
				allowed = allowed || q == p
			}
			if got := auth.Can([]string{role}, p); got != allowed {
				t.Errorf("Can(%s, %s) = %v, want %v", role, p, got, allowed)
			}
		}
	}
	if auth.Can(nil, auth.Read) || auth.Can([]string{"root"}, auth.Read) {
		t.Error("no role or an unknown role grants read")
	}
	if !auth.Can([]string{store.RoleViewer, store.RoleApprover}, auth.Approve) {
		t.Error("roles do not add up")
	}
}

func TestSecretShapeAndHash(t *testing.T) {
	t.Parallel()
	a, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := auth.NewSecret()
	if a == b || !strings.HasPrefix(a, auth.SecretPrefix) || len(a) != len(auth.SecretPrefix)+43 {
		t.Fatalf("secrets %q %q: want distinct mst_ + 43 base64url characters", a, b)
	}
	if h := auth.Hash(a); len(h) != 64 || h == auth.Hash(b) || strings.Contains(h, a) {
		t.Fatalf("hash %q is not a distinct sha-256 hex digest", h)
	}
}

func TestCheckToken(t *testing.T) {
	t.Parallel()
	roles, err := auth.CheckToken("bob", []string{"operator", "approver", "operator"})
	if err != nil || strings.Join(roles, ",") != "approver,operator" {
		t.Fatalf("CheckToken = %v, %v; want sorted unique roles", roles, err)
	}
	if roles, err := auth.CheckToken("dana", nil); err != nil || len(roles) != 0 {
		t.Fatalf("CheckToken without roles = %v, %v; want a token that holds its person's grants alone", roles, err)
	}
	for _, c := range []struct {
		name  string
		roles []string
	}{
		{"", []string{"viewer"}}, {"has space", []string{"viewer"}}, {"-dash", []string{"viewer"}},
		{strings.Repeat("x", 65), []string{"viewer"}}, {"bob", []string{"root"}},
	} {
		if _, err := auth.CheckToken(c.name, c.roles); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("CheckToken(%q, %v) = %v, want ErrInvalid", c.name, c.roles, err)
		}
	}
}

func TestCreateAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := setup(t)
	secret, err := auth.CreateToken(ctx, st, "bob", []string{"approver"}, "admin", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	authn := func(s string) (*store.Token, error) {
		var tok *store.Token
		err := st.Read(ctx, func(r store.Reader) error {
			var err error
			tok, err = auth.Authenticate(ctx, r, s)
			return err
		})
		return tok, err
	}
	tok, err := authn(secret)
	if err != nil || tok.Name != "bob" || strings.Join(tok.Roles, ",") != "approver" {
		t.Fatalf("Authenticate = %+v, %v", tok, err)
	}
	if tok.Hash != auth.Hash(secret) {
		t.Fatal("the stored hash is not the hash of the secret")
	}
	other, _ := auth.NewSecret()
	for _, bad := range []string{"", "mst_", "Bearer " + secret, secret + "x", other, strings.TrimPrefix(secret, auth.SecretPrefix)} {
		if _, err := authn(bad); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
		}
		if _, err := authn(bad); err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error %q repeats the secret", err)
		}
	}
	if _, err := auth.CreateToken(ctx, st, "bob", []string{"viewer"}, "admin", ""); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second token named bob: %v, want ErrExists", err)
	}
	if err := auth.RevokeToken(ctx, st, "bob", "admin", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := authn(secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v, want ErrUnauthenticated", err)
	}
	if err := auth.RevokeToken(ctx, st, "bob", "admin", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking twice: %v, want ErrNotFound", err)
	}

	var evs []store.Event
	_ = st.Read(ctx, func(r store.Reader) error { evs, err = r.Events(ctx, 0, 100); return err })
	if len(evs) != 2 || evs[0].Type != store.EventTokenCreated || evs[1].Type != store.EventTokenRevoked {
		t.Fatalf("events = %+v, want token.created then token.revoked", evs)
	}
	for _, e := range evs {
		if e.Actor != "admin" || e.ClientAddr != "10.0.0.1" {
			t.Errorf("event %s: actor %q addr %q", e.Type, e.Actor, e.ClientAddr)
		}
		if strings.Contains(e.Message+anyString(e.Data), secret) || strings.Contains(anyString(e.Data), auth.Hash(secret)) {
			t.Errorf("event %s carries the secret or its hash", e.Type)
		}
	}
}

func anyString(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		if s, ok := v.(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

func TestBootstrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := setup(t)
	dir := filepath.Join(t.TempDir(), "data")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	if err := auth.Bootstrap(ctx, st, dir, log); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, auth.AdminTokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token mode %v, want 0600", fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	secret := strings.TrimSpace(string(raw))
	var tok *store.Token
	err = st.Read(ctx, func(r store.Reader) error {
		tok, err = auth.Authenticate(ctx, r, secret)
		return err
	})
	if err != nil || tok.Name != auth.BootstrapName || !auth.Can(tok.Roles, auth.Tokens) {
		t.Fatalf("the file's secret authenticates as %+v, %v; want an admin", tok, err)
	}
	if !strings.Contains(logs.String(), path) {
		t.Errorf("log does not name the file: %s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("log contains the secret")
	}

	// A second start leaves the store and the file alone.
	logs.Reset()
	if err := auth.Bootstrap(ctx, st, dir, log); err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(path)
	if string(raw2) != string(raw) || logs.Len() != 0 {
		t.Fatal("bootstrap on a store with tokens changed the file or logged")
	}
	var toks []store.Token
	_ = st.Read(ctx, func(r store.Reader) error { toks, err = r.Tokens(ctx); return err })
	if len(toks) != 1 {
		t.Fatalf("%d tokens after two bootstraps, want 1", len(toks))
	}
}

func TestBootstrapConcurrentMakesOneToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := setup(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- auth.Bootstrap(ctx, st, dir, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var toks []store.Token
	var err error
	_ = st.Read(ctx, func(r store.Reader) error { toks, err = r.Tokens(ctx); return err })
	if len(toks) != 1 {
		t.Fatalf("%d tokens, want 1", len(toks))
	}
	raw, _ := os.ReadFile(filepath.Join(dir, auth.AdminTokenFile))
	if toks[0].Hash != auth.Hash(strings.TrimSpace(string(raw))) {
		t.Fatal("admin.token does not hold the stored token's secret")
	}
}

// TestBootstrapReplicasMakeOneToken: core replicas starting together on one
// PostgreSQL database, each with its own data directory, make one admin
// token; one directory holds its secret, and no other holds a file.
func TestBootstrapReplicasMakeOneToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	const replicas = 4
	stores := make([]store.Store, replicas)
	dirs := make([]string, replicas)
	for i := range replicas {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i], dirs[i] = st, t.TempDir()
	}
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for i := range replicas {
		wg.Go(func() { errs <- auth.Bootstrap(ctx, stores[i], dirs[i], slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var toks []store.Token
	var err error
	_ = stores[0].Read(ctx, func(r store.Reader) error { toks, err = r.Tokens(ctx); return err })
	if err != nil || len(toks) != 1 {
		t.Fatalf("%d tokens (%v), want 1", len(toks), err)
	}
	var files []string
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, auth.AdminTokenFile))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, dir)
		if toks[0].Hash != auth.Hash(strings.TrimSpace(string(raw))) {
			t.Errorf("%s holds a secret that opens nothing", dir)
		}
	}
	if len(files) != 1 {
		t.Fatalf("admin.token in %d directories, want 1", len(files))
	}
}

// TestJoinTokenOptions: a join token needs its cluster and goes alone; cluster
// and uses are refused on other tokens; a join token without a TTL gets the
// default one; an expired token no longer authenticates.
func TestJoinTokenOptions(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	uses, zero := 3, 0
	bad := []struct {
		name  string
		roles []string
		o     auth.Options
	}{
		{"join without cluster", []string{store.RoleEnroll}, auth.Options{}},
		{"join with another role", []string{store.RoleEnroll, store.RoleViewer}, auth.Options{ClusterID: "prod"}},
		{"cluster on a viewer", []string{store.RoleViewer}, auth.Options{ClusterID: "prod"}},
		{"uses on a viewer", []string{store.RoleViewer}, auth.Options{Uses: &uses}},
		{"zero uses", []string{store.RoleEnroll}, auth.Options{ClusterID: "prod", Uses: &zero}},
		{"bad cluster", []string{store.RoleEnroll}, auth.Options{ClusterID: "no such/cluster"}},
		{"negative ttl", []string{store.RoleViewer}, auth.Options{TTL: -time.Hour}},
	}
	for i, c := range bad {
		if _, _, err := auth.CreateTokenWith(ctx, st, fmt.Sprintf("bad-%d", i), c.roles, c.o, "admin", ""); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	_, tok, err := auth.CreateTokenWith(ctx, st, "join", []string{store.RoleEnroll}, auth.Options{ClusterID: "prod", Uses: &uses}, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	if tok.ExpiresTS == nil || tok.ExpiresTS.Sub(tok.CreatedTS) != auth.DefaultJoinTTL || tok.ClusterID != "prod" || *tok.UsesLeft != 3 {
		t.Fatalf("join token = %+v", tok)
	}
	secret, _, err := auth.CreateTokenWith(ctx, st, "brief", []string{store.RoleViewer}, auth.Options{TTL: time.Microsecond}, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		err = st.Read(ctx, func(r store.Reader) error { _, err := auth.Authenticate(ctx, r, secret); return err })
		if err != nil || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v, want ErrUnauthenticated naming the expiry", err)
	}
}
