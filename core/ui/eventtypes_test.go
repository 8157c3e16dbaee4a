package ui

import (
	"net/url"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
)

// TestEveryEventTypeAndFamilyCanBeFiltered: the Events page and the live
// stream take every type the core appends and every family, as the API
// does; a page whose stream names a family the filter refused (the
// Approvals page's schedule.*) would never refresh.
func TestEveryEventTypeAndFamilyCanBeFiltered(t *testing.T) {
	t.Parallel()
	all := append([]string{}, store.EventTypes...)
	for _, fam := range store.EventTypeFamilies() {
		all = append(all, fam+".*")
	}
	for _, typ := range all {
		if _, err := decodeEventFilter(url.Values{"type": {typ}}); err != nil {
			t.Errorf("type %q refused: %v", typ, err)
		}
	}
	if _, err := decodeEventFilter(url.Values{"type": {strings.Join(all, ",")}}); err != nil {
		t.Errorf("all types at once refused: %v", err)
	}
	if _, err := decodeEventFilter(url.Values{"type": {"schedule.nonsense"}}); err == nil {
		t.Error("an unknown type was accepted")
	}
}
