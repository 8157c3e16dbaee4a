package ops_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func freezeEvents(t *testing.T, st store.Store) []store.Event {
	t.Helper()
	var out []store.Event
	err := st.Read(context.Background(), func(r store.Reader) error {
		es, err := r.Events(context.Background(), 0, 1000)
		for _, e := range es {
			if strings.HasPrefix(e.Type, "freeze.") {
				out = append(out, e)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An operator freezes a cluster; the freeze is stored with who and why
// and is an event; a viewer may not freeze; lifting early takes an
// approver and a reason, is an event, nudges the cluster, and is refused
// a second time; the list keeps the lifted one only when asked for all.
func TestFreezeCreateListLift(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	olga := ops.Caller{Name: "olga", Roles: []string{store.RoleOperator}, Addr: "192.0.2.1"}
	vera := ops.Caller{Name: "vera", Roles: []string{store.RoleViewer}}
	ann := ops.Caller{Name: "ann", Roles: []string{store.RoleApprover}, Addr: "192.0.2.2"}
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)

	if _, err := e.ops.CreateFreeze(ctx, vera, "prod", &wire.CreateFreezeRequest{Until: until, Reason: "x"}); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("a viewer freezes: %v, want forbidden", err)
	}
	for name, req := range map[string]wire.CreateFreezeRequest{
		"no reason":   {Until: until},
		"no until":    {Reason: "incident"},
		"ended":       {Until: time.Now().Add(-time.Minute), Reason: "incident"},
		"too far":     {Until: time.Now().Add(400 * 24 * time.Hour), Reason: "incident"},
		"control":     {Until: until, Reason: "a\nb"},
		"from past":   {From: ptr(time.Now().Add(-time.Hour)), Until: until, Reason: "incident"},
		"from after":  {From: ptr(until.Add(time.Hour)), Until: until, Reason: "incident"},
		"long reason": {Until: until, Reason: strings.Repeat("x", wire.MaxReason+1)},
		"bad source":  {Until: until, Reason: "x", Source: "config"},
		"path source": {Until: until, Reason: "x", Source: "file:../etc/policy.yaml"},
	} {
		if _, err := e.ops.CreateFreeze(ctx, olga, "prod", &req); !errors.Is(err, ops.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
	if _, err := e.ops.CreateFreeze(ctx, olga, "nope", &wire.CreateFreezeRequest{Until: until, Reason: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("freeze an unknown cluster: %v, want not found", err)
	}
	if got := freezeEvents(t, e.st); len(got) != 0 {
		t.Fatalf("refused freezes made events: %+v", got)
	}

	f, err := e.ops.CreateFreeze(ctx, olga, "prod", &wire.CreateFreezeRequest{Until: until, Reason: "incident 4711"})
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == "" || f.ClusterID != "prod" || !f.To.Equal(until) || f.CreatedBy != "olga" || f.Reason != "incident 4711" || f.LiftedTS != nil {
		t.Errorf("freeze = %+v", f)
	}
	evs := freezeEvents(t, e.st)
	if len(evs) != 1 || evs[0].Type != store.EventFreezeCreated || evs[0].Actor != "olga" || evs[0].ClientAddr != "192.0.2.1" ||
		evs[0].ClusterID != "prod" || !strings.Contains(evs[0].Message, "incident 4711") {
		t.Errorf("events after the freeze = %+v", evs)
	}
	list, err := e.ops.Freezes(ctx, vera, "", false)
	if err != nil || len(list) != 1 || list[0].ID != f.ID {
		t.Errorf("a viewer's list = %+v, %v", list, err)
	}

	if _, err := e.ops.LiftFreeze(ctx, olga, f.ID, "resolved"); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator lifts: %v, want forbidden", err)
	}
	if _, err := e.ops.LiftFreeze(ctx, ann, f.ID, " "); !errors.Is(err, ops.ErrBadRequest) {
		t.Errorf("a lift without a reason: %v, want a bad request", err)
	}
	if _, err := e.ops.LiftFreeze(ctx, ann, "nope", "resolved"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lift an unknown freeze: %v, want not found", err)
	}
	e.syncs.Take()
	lifted, err := e.ops.LiftFreeze(ctx, ann, f.ID, "resolved")
	if err != nil {
		t.Fatal(err)
	}
	if lifted.LiftedTS == nil || lifted.LiftedBy != "ann" || lifted.LiftReason != "resolved" {
		t.Errorf("lifted = %+v", lifted)
	}
	if got := e.syncs.Take(); !slices.Equal(got, []string{"prod"}) {
		t.Errorf("syncs after the lift = %v, want prod", got)
	}
	if _, err := e.ops.LiftFreeze(ctx, ann, f.ID, "again"); !errors.Is(err, ops.ErrConflict) {
		t.Errorf("lift twice: %v, want a conflict", err)
	}
	evs = freezeEvents(t, e.st)
	if len(evs) != 2 || evs[1].Type != store.EventFreezeLifted || evs[1].Actor != "ann" || !strings.Contains(evs[1].Message, "resolved") {
		t.Errorf("events after the lift = %+v", evs)
	}
	if list, _ := e.ops.Freezes(ctx, vera, "prod", false); len(list) != 0 {
		t.Errorf("freezes in force after the lift = %+v", list)
	}
	if list, _ := e.ops.Freezes(ctx, vera, "prod", true); len(list) != 1 || list[0].LiftedBy != "ann" {
		t.Errorf("every freeze after the lift = %+v", list)
	}
}

// A person whose grants do not reach a cluster neither sees its freezes
// nor lifts them: they do not exist for them.
func TestFreezesOfAClusterOutOfScopeDoNotExist(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	f, err := e.ops.CreateFreeze(ctx, admin, "prod", &wire.CreateFreezeRequest{Until: time.Now().Add(time.Hour), Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.CreateGrant(ctx, admin, &wire.CreateGrantRequest{Person: "sam", Role: store.RoleApprover, Clusters: "staging-*"}); err != nil {
		t.Fatal(err)
	}
	sam, err := e.ops.Identify(ctx, "sam", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := e.ops.Freezes(ctx, sam, "", true); err != nil || len(list) != 0 {
		t.Errorf("sam's list = %+v, %v, want none", list, err)
	}
	if _, err := e.ops.Freezes(ctx, sam, "prod", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("sam lists prod's: %v, want not found", err)
	}
	if _, err := e.ops.LiftFreeze(ctx, sam, f.ID, "mine now"); !errors.Is(err, store.ErrNotFound) || strings.Contains(err.Error(), "prod") {
		t.Errorf("sam lifts prod's freeze: %v, want not found without naming the cluster", err)
	}
	if _, err := e.ops.CreateFreeze(ctx, sam, "prod", &wire.CreateFreezeRequest{Until: time.Now().Add(time.Hour), Reason: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("sam freezes prod: %v, want not found", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A cluster holds at most schedule.MaxFreezes freezes in force: one more
// is a conflict that stores nothing.
func TestFreezesPerClusterAreBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	req := &wire.CreateFreezeRequest{Until: time.Now().Add(time.Hour), Reason: "x"}
	for range schedule.MaxFreezes {
		if _, err := e.ops.CreateFreeze(ctx, admin, "prod", req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.ops.CreateFreeze(ctx, admin, "prod", req); !errors.Is(err, ops.ErrConflict) {
		t.Fatalf("one freeze too many: %v, want a conflict", err)
	}
	if list, _ := e.ops.Freezes(ctx, admin, "prod", true); len(list) != schedule.MaxFreezes {
		t.Fatalf("%d freezes stored, want %d", len(list), schedule.MaxFreezes)
	}
}
