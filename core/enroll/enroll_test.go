package enroll_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// replicas opens two stores on one fresh PostgreSQL database and an
// enrollment service on each, signing with one CA.
func replicas(t *testing.T) (*enroll.Service, *enroll.Service, store.Store) {
	t.Helper()
	pair, err := tlsutil.NewCA(time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.ParseCA(pair)
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.NewDatabase(t)
	var out []*enroll.Service
	var first store.Store
	for range 2 {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		// Each hears the other's commits, as a core replica does.
		if err := st.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Stop)
		if first == nil {
			first = st
		}
		out = append(out, enroll.New(enroll.Config{CA: ca, Bundle: pair.CertPEM, Lifetime: time.Hour}, st, nil))
	}
	return out[0], out[1], first
}

// TestTwoReplicasShareUsesAndTheRevocationList: enrollments racing on two
// replicas take exactly the token's uses (the others are refused, used
// up); a revocation made on one replica reaches the other's list, its
// revoked-node view and its change hooks, through the store alone.
func TestTwoReplicasShareUsesAndTheRevocationList(t *testing.T) {
	t.Parallel()
	a, b, st := replicas(t)
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	var changes atomic.Int64
	b.OnChange(func() { changes.Add(1) })
	runs.Go(func() { b.Run(ctx) })

	uses := 2
	secret, _, err := auth.CreateTokenWith(ctx, st, "join", []string{store.RoleEnroll},
		auth.Options{ClusterID: "prod", Uses: &uses}, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	const tries = 6
	var (
		mu      sync.Mutex
		signed  []*wire.EnrollResponse
		refused int
		wg      sync.WaitGroup
	)
	for i := range tries {
		svc := []*enroll.Service{a, b}[i%2]
		wg.Go(func() {
			node := fmt.Sprintf("web-%d", i)
			csr, _, err := tlsutil.NewAgentCSR(node)
			if err != nil {
				t.Error(err)
				return
			}
			out, err := svc.Enroll(ctx, secret, wire.EnrollRequest{NodeID: node, ClusterID: "prod", CSR: string(csr)}, enroll.Caller{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				signed = append(signed, out)
			case errors.Is(err, enroll.ErrRefused):
				refused++
			default:
				t.Errorf("enroll %s: %v", node, err)
			}
		})
	}
	wg.Wait()
	if len(signed) != uses || refused != tries-uses {
		t.Fatalf("%d signed, %d refused; want %d and %d", len(signed), refused, uses, tries-uses)
	}

	victim := signed[0]
	before := changes.Load()
	serials, err := a.Revoke(ctx, "prod", victim.NodeID, "stolen", "admin", enroll.Caller{})
	if err != nil || len(serials) != 1 || serials[0] != victim.Serial {
		t.Fatalf("revoke: %v, %v", serials, err)
	}
	if !a.Revoked(victim.Serial) {
		t.Fatal("the revoking replica does not hold the serial at once")
	}
	testwait.Within(t, 10*time.Second, "the other replica's list holds the serial", func() bool {
		_, nodeRevoked := b.RevokedNode("prod", victim.NodeID)
		return b.Revoked(victim.Serial) && nodeRevoked && changes.Load() > before
	})
	if b.Revoked(signed[1].Serial) {
		t.Fatal("the other node was revoked too")
	}
}
