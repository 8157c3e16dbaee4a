package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// testJoinTokenFieldsRoundTrip: a join token's cluster, expiry, use
// count and labels come back as stored; an ordinary token has none.
func testJoinTokenFieldsRoundTrip(t *testing.T, db NewDB) {
	s := setup(t, db)
	exp, uses := t0.Add(24*time.Hour), 50
	join := store.Token{Name: "join-prod", Roles: []string{store.RoleEnroll}, Hash: "hj", CreatedTS: t0,
		ExpiresTS: &exp, ClusterID: "prod", UsesLeft: &uses, Labels: map[string]string{"role": "web", "zone": "a"}}
	plain := store.Token{Name: "alice", Roles: []string{store.RoleViewer}, Hash: "ha", CreatedTS: t0}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertToken(ctx, &join); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &plain)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.TokenByHash(ctx, "hj")
		if err != nil || !reflect.DeepEqual(*got, join) {
			t.Errorf("join token = %+v, %v; want %+v", got, err, join)
		}
		got, err = r.TokenByHash(ctx, "ha")
		if err != nil || !reflect.DeepEqual(*got, plain) {
			t.Errorf("plain token = %+v, %v; want %+v", got, err, plain)
		}
		return nil
	})
	if !join.Expired(exp) || join.Expired(exp.Add(-time.Second)) || plain.Expired(exp) {
		t.Error("Expired does not follow expires_ts")
	}
}

// testUseTokenCountsDownAtomically: concurrent uses from two stores on one
// database (two replicas) take exactly the uses there are; the rest get
// ErrUsedUp; a token without a count is never changed; a rolled-back use
// is given back.
func testUseTokenCountsDownAtomically(t *testing.T, db NewDB) {
	open := db(t)
	stores := []store.Store{open(t), open(t)}
	const uses, tries = 5, 12
	n := uses
	update(t, stores[0], func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertToken(ctx, &store.Token{Name: "join", Roles: []string{store.RoleEnroll}, Hash: "hj", CreatedTS: t0, UsesLeft: &n}); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &store.Token{Name: "free", Roles: []string{store.RoleEnroll}, Hash: "hf", CreatedTS: t0})
	})
	ctx := context.Background()
	// A use whose transaction fails is not taken.
	boom := errors.New("boom")
	if err := stores[0].Update(ctx, func(tx store.Tx) error {
		if _, err := tx.UseToken(ctx, "hj"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled-back use: %v", err)
	}
	var (
		mu   sync.Mutex
		left []int
		out  int
		wg   sync.WaitGroup
	)
	for i := range tries {
		st := stores[i%2]
		wg.Go(func() {
			var l int
			err := st.Update(ctx, func(tx store.Tx) error {
				var err error
				l, err = tx.UseToken(ctx, "hj")
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				left = append(left, l)
			case errors.Is(err, store.ErrUsedUp):
				out++
			default:
				t.Errorf("use: %v", err)
			}
		})
	}
	wg.Wait()
	slices.Sort(left)
	if !reflect.DeepEqual(left, []int{0, 1, 2, 3, 4}) || out != tries-uses {
		t.Fatalf("uses left after each use %v, %d refused; want 0..4 and %d", left, out, tries-uses)
	}
	update(t, stores[1], func(ctx context.Context, tx store.Tx) error {
		if l, err := tx.UseToken(ctx, "hf"); err != nil || l != -1 {
			t.Errorf("token without a count: %d, %v; want -1", l, err)
		}
		if _, err := tx.UseToken(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown token: %v, want ErrNotFound", err)
		}
		return nil
	})
	read(t, stores[1], func(ctx context.Context, r store.Reader) error {
		tok, err := r.TokenByHash(ctx, "hj")
		if err != nil || tok.UsesLeft == nil || *tok.UsesLeft != 0 {
			t.Errorf("join token after the uses = %+v, %v", tok, err)
		}
		tok, err = r.TokenByHash(ctx, "hf")
		if err != nil || tok.UsesLeft != nil {
			t.Errorf("free token = %+v, %v", tok, err)
		}
		return nil
	})
}

// testAgentCertsAndRevocation: certificates round-trip and list by node
// (newest first) and cluster; a taken serial is ErrExists; revoking a node
// marks its unrevoked certificates of that cluster only, returns their
// serials, and another store on the database (a replica) reads the
// revocation list.
func testAgentCertsAndRevocation(t *testing.T, db NewDB) {
	open := db(t)
	s, replica := open(t), open(t)
	cert := func(serial, cluster, node string, issued time.Time) store.AgentCert {
		return store.AgentCert{Serial: serial, ClusterID: cluster, NodeID: node, NotBefore: issued.Add(-5 * time.Minute),
			NotAfter: issued.Add(30 * 24 * time.Hour), IssuedTS: issued, IssuedBy: "join"}
	}
	a1 := cert("0a", "prod", "db-1", t0)
	a1.Labels = map[string]string{"role": "db"}
	a2 := cert("0b", "prod", "db-1", t0.Add(time.Hour))
	b1 := cert("0c", "prod", "db-2", t0)
	c1 := cert("0d", "staging", "db-1", t0)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []store.AgentCert{a1, a2, b1, c1} {
			if err := tx.InsertAgentCert(ctx, &c); err != nil {
				return err
			}
		}
		return nil
	})
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertAgentCert(ctx, &a1) }); !errors.Is(err, store.ErrExists) {
		t.Fatalf("taken serial: %v, want ErrExists", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.AgentCerts(ctx, "prod", "db-1")
		if err != nil || !reflect.DeepEqual(got, []store.AgentCert{a2, a1}) {
			t.Errorf("AgentCerts(prod, db-1) = %+v, %v", got, err)
		}
		got, err = r.AgentCerts(ctx, "", "db-1")
		if err != nil || len(got) != 3 {
			t.Errorf("AgentCerts(any cluster, db-1) = %+v, %v; want 3", got, err)
		}
		got, err = r.AgentCerts(ctx, "prod", "")
		if err != nil || len(got) != 3 {
			t.Errorf("AgentCerts(prod, any node) = %+v, %v; want 3", got, err)
		}
		one, err := r.AgentCert(ctx, "0c")
		if err != nil || !reflect.DeepEqual(*one, b1) {
			t.Errorf("AgentCert = %+v, %v", one, err)
		}
		if _, err := r.AgentCert(ctx, "ff"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing serial: %v", err)
		}
		rev, err := r.RevokedSerials(ctx)
		if err != nil || len(rev) != 0 {
			t.Errorf("revoked before any revocation = %v, %v", rev, err)
		}
		return nil
	})
	at := t0.Add(2 * time.Hour)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.RevokeAgentCerts(ctx, "prod", "db-1", at, "stolen", "admin")
		slices.Sort(got)
		if err != nil || !reflect.DeepEqual(got, []string{"0a", "0b"}) {
			t.Errorf("revoked = %v, %v; want 0a 0b", got, err)
		}
		again, err := tx.RevokeAgentCerts(ctx, "prod", "db-1", at, "again", "admin")
		if err != nil || len(again) != 0 {
			t.Errorf("revoking again = %v, %v; want none", again, err)
		}
		return nil
	})
	// Retiring: once, from a time that may be later (a grace); a node's
	// revocation before that time revokes it at once.
	later := at.Add(time.Minute)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if ok, err := tx.RetireAgentCert(ctx, "0c", later, "renewed", "renewal"); err != nil || !ok {
			t.Errorf("retiring 0c = %v, %v; want true", ok, err)
		}
		for _, serial := range []string{"0c", "0a", "ff"} {
			if ok, err := tx.RetireAgentCert(ctx, serial, later, "renewed", "renewal"); err != nil || ok {
				t.Errorf("retiring %s again, revoked or unknown = %v, %v; want false", serial, ok, err)
			}
		}
		got, err := tx.RevokeAgentCerts(ctx, "prod", "db-2", at, "stolen", "admin")
		if err != nil || !reflect.DeepEqual(got, []string{"0c"}) {
			t.Errorf("revoking a node whose certificate is retiring = %v, %v; want 0c", got, err)
		}
		one, err := tx.AgentCert(ctx, "0c")
		if err != nil || one.RevokedTS == nil || !one.RevokedTS.Equal(at) || one.RevokeReason != "stolen" {
			t.Errorf("the retiring certificate revoked = %+v, %v; want revoked at %s", one, err, at)
		}
		return nil
	})
	read(t, replica, func(ctx context.Context, r store.Reader) error {
		rev, err := r.RevokedSerials(ctx)
		if err != nil || !reflect.DeepEqual(rev, []string{"0a", "0b", "0c"}) {
			t.Errorf("the replica's revocation list = %v, %v", rev, err)
		}
		one, err := r.AgentCert(ctx, "0a")
		if err != nil || one.RevokedTS == nil || !one.RevokedTS.Equal(at) || one.RevokeReason != "stolen" || one.RevokedBy != "admin" {
			t.Errorf("revoked certificate = %+v, %v", one, err)
		}
		if one.Live(at) || !a1.Live(at) || a1.Live(a1.NotAfter) {
			t.Error("Live does not follow revocation and expiry")
		}
		other, err := r.AgentCert(ctx, "0d")
		if err != nil || other.RevokedTS != nil {
			t.Errorf("the other cluster's db-1 was revoked: %+v, %v", other, err)
		}
		return nil
	})
	// Pruning drops the node's certificates expired before a time, of
	// every cluster, and no other.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.PruneAgentCerts(ctx, "db-1", a2.NotAfter.Add(time.Minute))
		if err != nil || n != 3 {
			t.Errorf("pruned %d, %v; want 0a, 0b and 0d", n, err)
		}
		return nil
	})
	read(t, replica, func(ctx context.Context, r store.Reader) error {
		left, err := r.AgentCerts(ctx, "", "")
		if err != nil || len(left) != 1 || left[0].Serial != "0c" {
			t.Errorf("after pruning db-1: %+v, %v; want db-2's alone", left, err)
		}
		return nil
	})
}
