package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// testReplaceRequests: a node's request round trips, a newer one takes
// its place, and deleting it returns what it asked (nothing the second
// time).
func testReplaceRequests(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, q := range []store.ReplaceRequest{
			{ClusterID: "prod", NodeID: "web-9", Replaces: "web-2", Token: "join", RequestedTS: t0},
			{ClusterID: "prod", NodeID: "web-9", Replaces: "web-3", Token: "join2", RequestedTS: t0.Add(time.Minute)},
			{ClusterID: "stage", NodeID: "web-9", Replaces: "web-1", Token: "join", RequestedTS: t0},
		} {
			if err := tx.PutReplaceRequest(ctx, &q); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		qs, err := r.ReplaceRequests(ctx, "prod")
		if err != nil {
			return err
		}
		if len(qs) != 1 || qs[0].Replaces != "web-3" || qs[0].Token != "join2" || !qs[0].RequestedTS.Equal(t0.Add(time.Minute)) {
			t.Errorf("prod's requests = %+v", qs)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []string{"web-3", ""} {
			got, err := tx.DeleteReplaceRequest(ctx, "prod", "web-9")
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("delete = %q, want %q", got, want)
			}
		}
		qs, err := tx.ReplaceRequests(ctx, "stage")
		if err != nil || len(qs) != 1 {
			t.Errorf("stage's requests = %+v, %v", qs, err)
		}
		return err
	})
}

// testOnAlert: a cluster's on_alert state round trips and is replaced
// whole; a cluster without one is ErrNotFound.
func testOnAlert(t *testing.T, db NewDB) {
	s := setup(t, db)
	read(t, s, func(ctx context.Context, r store.Reader) error {
		if _, err := r.OnAlert(ctx, "prod"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("no state = %v, want ErrNotFound", err)
		}
		return nil
	})
	since := t0.Add(time.Minute)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutOnAlert(ctx, &store.OnAlert{ClusterID: "prod", Digest: "d1", ApprovedBy: "bob", ApprovedTS: &t0, UpdatedTS: t0}); err != nil {
			return err
		}
		return tx.PutOnAlert(ctx, &store.OnAlert{ClusterID: "prod", Digest: "d1", ApprovedBy: "bob", ApprovedTS: &t0, Alerts: 2,
			AlertSince: &since, Missing: []string{"db-2", "db-3"}, RunID: "r1", Outcome: "FAILED", UpdatedTS: since})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		a, err := r.OnAlert(ctx, "prod")
		if err != nil {
			return err
		}
		if a.Digest != "d1" || a.ApprovedBy != "bob" || a.ApprovedTS == nil || !a.ApprovedTS.Equal(t0) || a.Alerts != 2 ||
			a.AlertSince == nil || !a.AlertSince.Equal(since) || !slices.Equal(a.Missing, []string{"db-2", "db-3"}) ||
			a.RunID != "r1" || a.Outcome != "FAILED" || !a.UpdatedTS.Equal(since) {
			t.Errorf("state = %+v", a)
		}
		return nil
	})
}
