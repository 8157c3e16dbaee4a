package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// Freezes and windows are records in the store (docs/policy-as-data.md).
// Holder composes the one Calendars value every decision reads (the
// orchestrator's gate, the API, the web UI): the windows of the store's
// records (SetConfig, called by policy.Holder) and the freezes of the store
// that still hold. The configuration's reach it only through the store
// (they seed it at start, ConfigFreezeID), so a freeze lifted in the store
// is lifted on every replica, whatever its file says.
type Holder struct {
	mu      sync.Mutex
	windows Calendars // windows only
	freezes map[string][]Freeze
	out     *live.Value[Calendars]
}

// NewHolder holds the windows of config and no freeze yet.
func NewHolder(config Calendars) *Holder {
	h := &Holder{out: live.New(Calendars{}), freezes: map[string][]Freeze{}}
	h.SetConfig(config)
	return h
}

// Value is the holder every consumer reads through Load at each decision.
func (h *Holder) Value() *live.Value[Calendars] { return h.out }

// SetConfig takes the windows of config (those of the store's records);
// its freezes are ignored: they reach the calendars through SetFreezes.
func (h *Holder) SetConfig(config Calendars) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.windows = Calendars{}
	for id, c := range config {
		if c != nil && (len(c.Windows) > 0 || c.Closed != "") {
			h.windows[id] = &Calendar{Windows: c.Windows, Closed: c.Closed}
		}
	}
	h.publish()
}

// SetFreezes makes fs (stored freezes) the freezes of the calendars: those
// lifted are left out. It returns the clusters whose freezes changed.
func (h *Holder) SetFreezes(fs []store.Freeze) []string {
	next := map[string][]Freeze{}
	for _, f := range fs {
		if f.LiftedTS != nil {
			continue
		}
		next[f.ClusterID] = append(next[f.ClusterID], Freeze{ID: f.ID, From: f.From, To: f.To, Reason: f.Reason})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var changed []string
	for id := range maps.Keys(next) {
		if !reflect.DeepEqual(next[id], h.freezes[id]) {
			changed = append(changed, id)
		}
	}
	for id := range maps.Keys(h.freezes) {
		if _, ok := next[id]; !ok {
			changed = append(changed, id)
		}
	}
	h.freezes = next
	h.publish()
	slices.Sort(changed)
	return changed
}

// publish stores the composed calendars; h.mu is held.
func (h *Holder) publish() {
	out := Calendars{}
	for id, c := range h.windows {
		out[id] = &Calendar{Windows: c.Windows, Closed: c.Closed}
	}
	for id, fs := range h.freezes {
		if len(fs) > MaxFreezes { // each question walks them all: keep those ending last
			fs = slices.Clone(fs)
			slices.SortFunc(fs, func(a, b Freeze) int { return b.To.Compare(a.To) })
			fs = fs[:MaxFreezes]
		}
		if out[id] == nil {
			out[id] = &Calendar{}
		}
		out[id].Freezes = fs
	}
	h.out.Store(out)
}

// ConfigFreezeID is the id of a freeze of the configuration: the same on
// every replica and at every start for the same cluster, span and reason,
// so seeding it twice makes one record.
func ConfigFreezeID(cluster string, f FreezeSpec) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + f.From + "\x00" + f.To + "\x00" + f.Reason))
	return "cfg-" + hex.EncodeToString(sum[:6])
}

// LoadFreezes reads the stored freezes that hold at now or later.
func LoadFreezes(ctx context.Context, st store.Store, now time.Time) ([]store.Freeze, error) {
	var fs []store.Freeze
	err := st.Read(ctx, func(r store.Reader) error {
		var err error
		fs, err = r.Freezes(ctx, store.FreezeQuery{Live: true, EndsAfter: now})
		return err
	})
	return fs, err
}

// Watch keeps h's freezes those of the store: it loads them, then again
// whenever the event log (of this replica or, on PostgreSQL, of another)
// shows a freeze made or lifted, and calls changed with the clusters whose
// freezes changed (to sync them now), until ctx ends. Other commits cost
// one read of their events.
func Watch(ctx context.Context, st store.Store, h *Holder, log *slog.Logger, changed func(clusters []string)) {
	store.Follow(ctx, st, []string{store.EventFreezeCreated, store.EventFreezeLifted}, func(ctx context.Context) error {
		fs, err := LoadFreezes(ctx, st, time.Now())
		if err != nil {
			return err
		}
		if cs := h.SetFreezes(fs); len(cs) > 0 && changed != nil {
			changed(cs)
		}
		return nil
	}, func(err error, loaded bool) {
		if loaded {
			log.Warn("freezes: reading the stored freezes failed; the last ones stay", "err", err)
		} else {
			log.Warn("freezes: reading the stored freezes failed; trying again at the next commit", "err", err)
		}
	})
}
