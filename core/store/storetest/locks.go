package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// testRunLocksHaveOneHolder: a lock taken is held by its first taker until
// it releases it; another's take answers the holder and changes nothing;
// a release by another run does nothing; releasing a run's locks frees
// them all.
func testRunLocksHaveOneHolder(t *testing.T, db NewDB) {
	s := setup(t, db)
	key := store.Lock{Name: "db"}.Key("c1")
	if key != "cluster/c1/db" || (store.Lock{Name: "db", Scope: store.LockGlobal}).Key("c1") != "global/db" {
		t.Fatalf("keys: %q", key)
	}
	take := func(key, run, stage string) store.RunLock {
		t.Helper()
		var l store.RunLock
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			l, err = tx.TakeRunLock(ctx, key, run, stage, t0)
			return err
		})
		return l
	}
	if l := take(key, "a", "up"); l.RunID != "a" || l.Stage != "up" || !l.TakenTS.Equal(t0) || l.Key != key {
		t.Fatalf("a takes: %+v", l)
	}
	if l := take(key, "b", ""); l.RunID != "a" || l.Stage != "up" {
		t.Fatalf("b takes a held lock: %+v, want a's", l)
	}
	take("global/other", "a", "")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if ok, err := tx.ReleaseRunLock(ctx, key, "b"); ok || err != nil {
			t.Errorf("b releases a's lock: %v, %v", ok, err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.RunLocks(ctx, "a")
		if err != nil || len(got) != 2 || got[0].Key != key || got[1].Key != "global/other" {
			t.Errorf("RunLocks(a) = %+v, %v", got, err)
		}
		if h, err := r.RunLock(ctx, key); err != nil || h.RunID != "a" || h.Stage != "up" {
			t.Errorf("RunLock(%s) = %+v, %v; want a's", key, h, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if n, err := tx.ReleaseRunLocks(ctx, "a"); n != 2 || err != nil {
			t.Errorf("ReleaseRunLocks(a) = %d, %v; want 2", n, err)
		}
		return nil
	})
	if l := take(key, "b", ""); l.RunID != "b" {
		t.Fatalf("b takes the freed lock: %+v", l)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if ok, err := tx.ReleaseRunLock(ctx, key, "b"); !ok || err != nil {
			t.Errorf("b releases its lock: %v, %v", ok, err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		if got, err := r.RunLocks(ctx, "b"); len(got) != 0 || err != nil {
			t.Errorf("RunLocks(b) after its release = %+v, %v", got, err)
		}
		if h, err := r.RunLock(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RunLock(%s) of a free lock = %+v, %v; want ErrNotFound", key, h, err)
		}
		return nil
	})
}

// testRunLocksOneHolderAcrossStores: runs taking one free lock at once,
// through two stores on one database (two core replicas), each in a
// transaction that also writes a row: all find the same one holder.
func testRunLocksOneHolderAcrossStores(t *testing.T, db NewDB) {
	open := db(t)
	stores := []store.Store{open(t), open(t)}
	putClusterNode(t, stores[0], "c1", "n1")
	const runs = 8
	var wg sync.WaitGroup
	holders := make([]string, runs)
	errs := make(chan error, runs)
	start := make(chan struct{})
	for i := range runs {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			ctx := context.Background()
			errs <- s.Update(ctx, func(tx store.Tx) error {
				l, err := tx.TakeRunLock(ctx, "global/db", fmt.Sprintf("run-%d", i), "", t0.Add(time.Duration(i)))
				if err != nil {
					return err
				}
				holders[i] = l.RunID
				n, err := tx.Node(ctx, "c1", "n1")
				if err != nil {
					return err
				}
				n.Cursor++
				n.UpdatedTS = time.Time{}
				return tx.PutNode(ctx, n)
			})
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var held []store.RunLock
	for i := range runs {
		read(t, stores[1], func(ctx context.Context, r store.Reader) error {
			got, err := r.RunLocks(ctx, fmt.Sprintf("run-%d", i))
			held = append(held, got...)
			return err
		})
	}
	if len(held) != 1 {
		t.Fatalf("holders in the store: %+v, want one", held)
	}
	want := make([]string, runs)
	for i := range want {
		want[i] = held[0].RunID
	}
	if !reflect.DeepEqual(holders, want) {
		t.Errorf("each take found holder %v, want %s for all", holders, held[0].RunID)
	}
}
