package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// testApprovals: approvals round-trip, oldest first; a person approves a
// digest of a subject once (names ignoring case), and the refusal leaves
// the transaction usable; another digest, another subject and another
// kind are other approvals.
func testApprovals(t *testing.T, db NewDB) {
	s := setup(t, db)
	a := store.Approval{SubjectKind: store.SubjectRun, SubjectID: "r1", Digest: "d1", Person: "dana", Level: "teams=db;persons=;min=1", DecidedTS: t0}
	b := store.Approval{SubjectKind: store.SubjectRun, SubjectID: "r1", Digest: "d1", Person: "sam", Level: "teams=sre;persons=;min=1", DecidedTS: t0.Add(time.Second)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, x := range []*store.Approval{&b, &a} {
			if err := tx.InsertApproval(ctx, x); err != nil {
				return err
			}
		}
		dup := store.Approval{SubjectKind: store.SubjectRun, SubjectID: "r1", Digest: "d1", Person: "DANA", Level: "x", DecidedTS: t0}
		if err := tx.InsertApproval(ctx, &dup); !errors.Is(err, store.ErrExists) {
			t.Errorf("dana twice: %v, want ErrExists", err)
		}
		for _, x := range []store.Approval{
			{SubjectKind: store.SubjectRun, SubjectID: "r1", Digest: "d2", Person: "dana", Level: "l", DecidedTS: t0.Add(2 * time.Second)},
			{SubjectKind: store.SubjectRun, SubjectID: "r2", Digest: "d1", Person: "dana", Level: "l", DecidedTS: t0},
			{SubjectKind: store.SubjectPromote, SubjectID: "r1", Digest: "d1", Person: "dana", Level: "l", DecidedTS: t0},
		} {
			if err := tx.InsertApproval(ctx, &x); err != nil {
				t.Errorf("%+v: %v", x, err)
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Approvals(ctx, store.SubjectRun, "r1")
		if err != nil {
			return err
		}
		want := []store.Approval{a, b, {SubjectKind: store.SubjectRun, SubjectID: "r1", Digest: "d2", Person: "dana", Level: "l",
			DecidedTS: t0.Add(2 * time.Second)}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Approvals =\n%+v\nwant\n%+v", got, want)
		}
		none, err := r.Approvals(ctx, store.SubjectAction, "r1")
		if err != nil || len(none) != 0 || none == nil {
			t.Errorf("none: %#v, %v", none, err)
		}
		return nil
	})
}
