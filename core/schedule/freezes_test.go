package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// The holder's calendars are the configuration's windows and the store's
// freezes in force: the configuration's own freezes are not read (they
// reach it through the store), a lifted one holds nothing, and a change
// names the clusters it touched.
func TestHolderComposesConfigWindowsAndStoredFreezes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w, err := NewWindow("0 2 * * *", 4*time.Hour, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	cfgFreeze := Freeze{From: now.Add(-time.Hour), To: now.Add(time.Hour), Reason: "from the file"}
	h := NewHolder(Calendars{"prod": {Windows: []Window{w}, Freezes: []Freeze{cfgFreeze}}, "stage": {Freezes: []Freeze{cfgFreeze}}})
	if st := h.Value().Load().Of("prod").At(now); st.Frozen != nil {
		t.Fatalf("a freeze of the file held without the store: %+v", st.Frozen)
	}
	if h.Value().Load().Of("stage") != nil {
		t.Fatal("a cluster with only a file freeze has a calendar")
	}
	lifted := now
	changed := h.SetFreezes([]store.Freeze{
		{ID: "f1", ClusterID: "prod", From: now.Add(-time.Minute), To: now.Add(time.Hour), Reason: "incident 4711"},
		{ID: "f2", ClusterID: "stage", From: now.Add(-time.Minute), To: now.Add(time.Hour), Reason: "x", LiftedTS: &lifted},
		{ID: "f3", ClusterID: "dev", From: now.Add(-time.Minute), To: now.Add(time.Hour), Reason: "dev"},
	})
	if !slices.Equal(changed, []string{"dev", "prod"}) {
		t.Errorf("changed = %v, want dev, prod", changed)
	}
	st := h.Value().Load().Of("prod").At(now)
	if st.Frozen == nil || st.Frozen.ID != "f1" || st.Frozen.Reason != "incident 4711" || !st.Windowed {
		t.Errorf("prod at now = %+v", st)
	}
	if h.Value().Load().Of("stage") != nil {
		t.Error("a lifted freeze makes a calendar")
	}
	if again := h.SetFreezes([]store.Freeze{{ID: "f1", ClusterID: "prod", From: now.Add(-time.Minute), To: now.Add(time.Hour),
		Reason: "incident 4711"}}); !slices.Equal(again, []string{"dev"}) {
		t.Errorf("changed after dev's freeze went = %v, want dev", again)
	}
	h.SetConfig(Calendars{})
	if st := h.Value().Load().Of("prod").At(now); st.Windowed || st.Frozen == nil {
		t.Errorf("prod after a reload without windows = %+v, want frozen and no windows", st)
	}
}
