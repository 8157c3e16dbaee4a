package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

func testSchedule(id, name string) *store.Schedule {
	return &store.Schedule{
		ID: id, Name: name, ClusterID: "c1", Playbook: "patch", Version: 0, Params: json.RawMessage(`{"reboot":true}`),
		Cron: "0 2 * * *", Timezone: "Europe/Berlin", Concurrency: store.ConcurrencyForbid, CatchUpS: 600,
		State: store.SchedulePendingApprove, StateReason: "created", Requester: "alice", Digest: "d1",
		CreatedTS: t0, UpdatedTS: t0, Source: "file:policy.yaml",
	}
}

// testSchedulesRoundTrip: a schedule keeps every field; names and ids are
// unique; an update replaces it; a delete removes it and leaves its runs.
func testSchedulesRoundTrip(t *testing.T, db NewDB) {
	s := setup(t, db)
	a := testSchedule("00000000-0000-4000-8000-0000000000a1", "nightly")
	b := testSchedule("00000000-0000-4000-8000-0000000000b1", "weekly")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSchedule(ctx, a); err != nil {
			return err
		}
		return tx.InsertSchedule(ctx, b)
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSchedule(ctx, testSchedule("00000000-0000-4000-8000-0000000000c1", "nightly")); !errors.Is(err, store.ErrExists) {
			t.Errorf("second schedule named nightly: %v, want ErrExists", err)
		}
		if err := tx.InsertSchedule(ctx, testSchedule(a.ID, "other")); !errors.Is(err, store.ErrExists) {
			t.Errorf("second schedule with a's id: %v, want ErrExists", err)
		}
		a.State, a.ApprovedBy, a.ApprovedDigest, a.ApprovedVersion = store.ScheduleActive, "bob", "d1", 3
		a.ActiveSince, a.LastOccurrence = action.TimePtr(t0.Add(time.Minute)), action.TimePtr(t0.Add(time.Hour))
		a.UpdatedTS, a.Source = t0.Add(time.Minute), ""
		return tx.UpdateSchedule(ctx, a)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Schedule(ctx, "nightly")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("Schedule = %+v\nwant %+v", got, a)
		}
		list, err := r.Schedules(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "nightly" || list[1].Name != "weekly" || list[1].Source != "file:policy.yaml" {
			t.Errorf("Schedules = %v, %v; want nightly, weekly", list, err)
		}
		if _, err := r.Schedule(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Schedule(nope) = %v, want ErrNotFound", err)
		}
		return nil
	})
	// Runs of a schedule, newest first; they stay when it goes.
	r1, r2 := testRun("00000000-0000-4000-8000-00000000001a", t0), testRun("00000000-0000-4000-8000-00000000002a", t0.Add(time.Minute))
	r1.ScheduleID, r2.ScheduleID = a.ID, a.ID
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertRun(ctx, r1); err != nil {
			return err
		}
		if err := tx.InsertRun(ctx, r2); err != nil {
			return err
		}
		return tx.InsertRun(ctx, testRun("00000000-0000-4000-8000-00000000003a", t0))
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteSchedule(ctx, "nightly"); err != nil {
			return err
		}
		if err := tx.DeleteSchedule(ctx, "nightly"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
		if err := tx.UpdateSchedule(ctx, a); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("update of a deleted schedule: %v, want ErrNotFound", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.ScheduleRuns(ctx, a.ID, 10)
		if err != nil || len(got) != 2 || got[0].ID != r2.ID || got[1].ID != r1.ID || got[0].ScheduleID != a.ID {
			t.Errorf("ScheduleRuns = %v, %v; want r2, r1", got, err)
		}
		one, err := r.Run(ctx, r1.ID)
		if err != nil || one.ScheduleID != a.ID {
			t.Errorf("Run(r1).ScheduleID = %v, %v; want %s", one, err, a.ID)
		}
		return nil
	})
}
