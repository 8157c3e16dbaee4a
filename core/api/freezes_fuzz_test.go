package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

// FuzzFreezeBodies decodes arbitrary bodies as the freezes' calls do and
// acts on what decodes as the operations do: a refusal is a 400 (or the
// 409 of a lift of a freeze lifted already), never a 5xx; what is accepted
// is a freeze that ends after it begins, with a reason.
func FuzzFreezeBodies(f *testing.F) {
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, s := range []string{`{"until":"` + until + `","reason":"incident 4711"}`,
		`{"from":"` + until + `","until":"` + until + `","reason":"x"}`, `{"until":"2026-13-01T00:00:00Z","reason":"x"}`,
		`{"until":"` + until + `"}`, `{"until":"` + until + `","reason":"a\u0000b"}`, `{"until":1}`, `{"reason":"resolved"}`,
		`{"reason":""}`, `{"reason":"x","extra":1}`, `[]`, ``, `{`, `null`} {
		f.Add([]byte(s))
	}
	st, err := sqlite.Open(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy})
	}); err != nil {
		f.Fatal(err)
	}
	o := ops.New(ops.Config{Store: st})
	admin := ops.Caller{Name: "root", Roles: []string{store.RoleAdmin}}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error, allowed ...int) {
			if err == nil {
				return
			}
			if st := statusOf(err); st != http.StatusBadRequest && (len(allowed) == 0 || st != allowed[0]) {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		}
		req, err := decodeFreeze(body)
		if err != nil {
			check(err)
		} else {
			fr, err := o.CreateFreeze(ctx, admin, "prod", req)
			check(err, http.StatusConflict) // the cluster holds as many freezes as it may
			if err == nil && (!fr.To.After(fr.From) || fr.Reason == "") {
				t.Fatalf("accepted %+v", fr)
			}
			if err == nil {
				lift, err := decodeLiftFreeze(body)
				if err != nil {
					check(err)
					return
				}
				_, err = o.LiftFreeze(ctx, admin, fr.ID, lift.Reason)
				check(err)
			}
		}
		if _, err := decodeLiftFreeze(body); err != nil {
			check(err)
		}
	})
}
