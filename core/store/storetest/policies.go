package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// testPolicies: a policy record round trips; each put is the next version
// with a row of history; a delete keeps the record (deleted, with who and
// why) and is recorded once; a put after a delete makes it live again; the
// queries keep a kind's, a cluster's and the live ones.
func testPolicies(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, p := range []store.PolicyRecord{
			{Kind: store.PolicyWindow, ID: "w1", ClusterID: "prod", Spec: `{"cron":"0 2 * * *"}`, Source: store.SourceConfig,
				UpdatedBy: "config", UpdatedTS: t0},
			{Kind: store.PolicyBudget, ID: "prod", ClusterID: "prod", Spec: `{"max_unavailable":"1"}`, UpdatedBy: "olga", UpdatedTS: t0,
				Reason: "start"},
			{Kind: store.PolicyWindow, ID: "w2", ClusterID: "stage", Spec: `{}`, Source: "file:p.yaml", UpdatedBy: "dana", UpdatedTS: t0},
		} {
			op, err := tx.PutPolicy(ctx, &p)
			if err != nil {
				return err
			}
			if op != store.PolicyOpCreated || p.Version != 1 || !p.CreatedTS.Equal(t0) {
				t.Errorf("put %s = %s, version %d, created %v", p.ID, op, p.Version, p.CreatedTS)
			}
		}
		p := store.PolicyRecord{Kind: store.PolicyBudget, ID: "prod", ClusterID: "prod", Spec: `{"max_unavailable":"2"}`,
			UpdatedBy: "ana", UpdatedTS: t0.Add(time.Minute), Reason: "wider"}
		if op, err := tx.PutPolicy(ctx, &p); err != nil || op != store.PolicyOpChanged || p.Version != 2 || p.CreatedBy != "olga" {
			t.Errorf("second put = %s, %v, %+v", op, err, p)
		}
		if ok, err := tx.DeletePolicy(ctx, store.PolicyWindow, "w2", t0.Add(2*time.Minute), "ana", "gone"); !ok || err != nil {
			t.Errorf("delete w2 = %v, %v", ok, err)
		}
		if ok, err := tx.DeletePolicy(ctx, store.PolicyWindow, "w2", t0.Add(3*time.Minute), "bo", "again"); ok || err != nil {
			t.Errorf("delete w2 again = %v, %v, want false, nil", ok, err)
		}
		if _, err := tx.DeletePolicy(ctx, store.PolicyWindow, "nope", t0, "bo", "x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete unknown = %v, want ErrNotFound", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		p, err := r.Policy(ctx, store.PolicyBudget, "prod")
		if err != nil {
			return err
		}
		if p.Spec != `{"max_unavailable":"2"}` || p.Version != 2 || p.UpdatedBy != "ana" || p.CreatedBy != "olga" ||
			!p.CreatedTS.Equal(t0) || !p.UpdatedTS.Equal(t0.Add(time.Minute)) || p.Reason != "wider" || p.DeletedTS != nil {
			t.Errorf("budget prod = %+v", p)
		}
		w2, err := r.Policy(ctx, store.PolicyWindow, "w2")
		if err != nil {
			return err
		}
		if w2.DeletedTS == nil || !w2.DeletedTS.Equal(t0.Add(2*time.Minute)) || w2.DeletedBy != "ana" || w2.DeleteReason != "gone" ||
			w2.Version != 2 {
			t.Errorf("deleted w2 = %+v", w2)
		}
		if _, err := r.Policy(ctx, store.PolicyBudget, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown = %v, want ErrNotFound", err)
		}
		for _, tc := range []struct {
			q    store.PolicyQuery
			want []string
		}{
			{store.PolicyQuery{}, []string{"prod", "w1", "w2"}},
			{store.PolicyQuery{Kind: store.PolicyWindow}, []string{"w1", "w2"}},
			{store.PolicyQuery{Kind: store.PolicyWindow, Live: true}, []string{"w1"}},
			{store.PolicyQuery{ClusterID: "stage"}, []string{"w2"}},
		} {
			ps, err := r.Policies(ctx, tc.q)
			if err != nil {
				return err
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.ID)
			}
			if len(got) != len(tc.want) {
				t.Errorf("%+v = %v, want %v", tc.q, got, tc.want)
				continue
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%+v = %v, want %v", tc.q, got, tc.want)
				}
			}
		}
		h, err := r.PolicyHistory(ctx, store.PolicyBudget, "prod")
		if err != nil {
			return err
		}
		if len(h) != 2 || h[0].Op != store.PolicyOpCreated || h[0].Actor != "olga" || h[1].Op != store.PolicyOpChanged ||
			h[1].Spec != `{"max_unavailable":"2"}` || h[1].Reason != "wider" || !h[1].TS.Equal(t0.Add(time.Minute)) {
			t.Errorf("history of budget prod = %+v", h)
		}
		if h, err := r.PolicyHistory(ctx, store.PolicyWindow, "w2"); err != nil || len(h) != 2 || h[1].Op != store.PolicyOpDeleted ||
			h[1].Actor != "ana" {
			t.Errorf("history of w2 = %+v, %v", h, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		p := store.PolicyRecord{Kind: store.PolicyWindow, ID: "w2", ClusterID: "stage", Spec: `{"x":1}`, UpdatedBy: "cy", UpdatedTS: t0.Add(time.Hour)}
		if op, err := tx.PutPolicy(ctx, &p); err != nil || op != store.PolicyOpCreated || p.Version != 3 || p.CreatedBy != "cy" {
			t.Errorf("put after delete = %s, %v, %+v", op, err, p)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		p, err := r.Policy(ctx, store.PolicyWindow, "w2")
		if err == nil && (p.DeletedTS != nil || p.DeletedBy != "") {
			t.Errorf("w2 after a put = %+v, want live", p)
		}
		return err
	})
}
