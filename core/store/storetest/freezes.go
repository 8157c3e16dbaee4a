package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

func freezeIDs(fs []store.Freeze) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// testFreezes: freezes round trip with their source and history; a lift
// is recorded once (the second says it changed nothing); the queries keep
// a cluster's, the live ones and those ending after a time.
func testFreezes(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, f := range []store.Freeze{
			{ID: "f1", ClusterID: "prod", From: t0, To: t0.Add(2 * time.Hour), Reason: "incident 4711", CreatedBy: "olga", CreatedTS: t0},
			{ID: "f2", ClusterID: "prod", From: t0.Add(-3 * time.Hour), To: t0.Add(-time.Hour), Reason: "old", Source: store.SourceConfig,
				CreatedBy: "config", CreatedTS: t0},
			{ID: "f3", ClusterID: "stage", From: t0.Add(time.Hour), To: t0.Add(5 * time.Hour), Reason: "demo",
				Source: "file:policy.yaml", CreatedBy: "dana"},
		} {
			if err := tx.InsertFreeze(ctx, &f); err != nil {
				return err
			}
		}
		if err := tx.InsertFreeze(ctx, &store.Freeze{ID: "f1", ClusterID: "x", From: t0, To: t0.Add(time.Hour)}); !errors.Is(err, store.ErrExists) {
			t.Errorf("freeze f1 again = %v, want ErrExists", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		f, err := r.Freeze(ctx, "f1")
		if err != nil {
			return err
		}
		if f.ClusterID != "prod" || !f.From.Equal(t0) || !f.To.Equal(t0.Add(2*time.Hour)) || f.Reason != "incident 4711" ||
			f.CreatedBy != "olga" || !f.CreatedTS.Equal(t0) || f.Source != "" || f.LiftedTS != nil {
			t.Errorf("freeze f1 = %+v", f)
		}
		if _, err := r.Freeze(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown freeze = %v, want ErrNotFound", err)
		}
		for _, tc := range []struct {
			q    store.FreezeQuery
			want []string
		}{
			{store.FreezeQuery{}, []string{"f2", "f1", "f3"}},
			{store.FreezeQuery{ClusterID: "prod"}, []string{"f2", "f1"}},
			{store.FreezeQuery{EndsAfter: t0}, []string{"f1", "f3"}},
			{store.FreezeQuery{ClusterID: "stage", EndsAfter: t0.Add(5 * time.Hour)}, []string{}},
		} {
			fs, err := r.Freezes(ctx, tc.q)
			if err != nil {
				return err
			}
			if got := freezeIDs(fs); !slices.Equal(got, tc.want) {
				t.Errorf("Freezes(%+v) = %v, want %v", tc.q, got, tc.want)
			}
		}
		return nil
	})
	lifted := t0.Add(30 * time.Minute)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		ok, err := tx.LiftFreeze(ctx, "f1", lifted, "ivan", "resolved")
		if err != nil || !ok {
			t.Errorf("lift f1 = %v, %v, want true", ok, err)
		}
		if ok, err := tx.LiftFreeze(ctx, "f1", lifted.Add(time.Minute), "eve", "again"); err != nil || ok {
			t.Errorf("lift f1 twice = %v, %v, want false and no error", ok, err)
		}
		if _, err := tx.LiftFreeze(ctx, "nope", lifted, "eve", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("lift an unknown freeze = %v, want ErrNotFound", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		f, err := r.Freeze(ctx, "f1")
		if err != nil {
			return err
		}
		if f.LiftedTS == nil || !f.LiftedTS.Equal(lifted) || f.LiftedBy != "ivan" || f.LiftReason != "resolved" {
			t.Errorf("lifted f1 = %+v", f)
		}
		if f.Holds(t0) {
			t.Error("a lifted freeze holds")
		}
		fs, err := r.Freezes(ctx, store.FreezeQuery{Live: true, EndsAfter: t0})
		if err != nil {
			return err
		}
		if got := freezeIDs(fs); !slices.Equal(got, []string{"f3"}) {
			t.Errorf("live freezes after lifting f1 = %v, want f3", got)
		}
		return nil
	})
}
