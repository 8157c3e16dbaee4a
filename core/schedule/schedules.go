package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Bounds and defaults of a schedule.
const (
	// DefaultCatchUp is how old a missed occurrence may be and still run.
	DefaultCatchUp = 10 * time.Minute
	// MaxCatchUp bounds catch_up.
	MaxCatchUp = 24 * time.Hour
	// MaxParams bounds the number of parameters.
	MaxParams = 100
	// MinEvery is the shortest "@every" of a schedule: as often as a
	// five-field cron may fire (`* * * * *`), no more.
	MinEvery = time.Minute
)

// FieldError is a bad field of a schedule: the API answers 400 naming it.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap makes a FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Check validates what of a schedule request does not need the store (its
// name, cron, time zone, concurrency and catch_up), fills the defaults, and
// returns the schedule's parsed cron and catch_up. A cron that never fires
// is refused (ParseCron), and so is an "@every" shorter than minEvery
// (MinEvery when 0; only the end-to-end tests set another, never below a
// second).
func Check(req *wire.CreateScheduleRequest, minEvery time.Duration) (Cron, time.Duration, error) {
	if err := names.CheckID(req.Name); err != nil {
		return Cron{}, 0, fieldErr("name", "%v", err)
	}
	if req.Cluster == "" {
		return Cron{}, 0, fieldErr("cluster", "is required")
	}
	if err := names.CheckID(req.Cluster); err != nil {
		return Cron{}, 0, fieldErr("cluster", "%v", err)
	}
	if req.Playbook == "" {
		return Cron{}, 0, fieldErr("playbook", "is required")
	}
	if err := names.CheckID(req.Playbook); err != nil {
		return Cron{}, 0, fieldErr("playbook", "%v", err)
	}
	if req.Version < 0 {
		return Cron{}, 0, fieldErr("version", "want a positive number or \"latest\"")
	}
	if len(req.Params) > MaxParams {
		return Cron{}, 0, fieldErr("params", "at most %d", MaxParams)
	}
	if _, err := LoadZone(req.Timezone); err != nil {
		return Cron{}, 0, fieldErr("timezone", "%v", err)
	}
	c, err := ParseCron(req.Cron, req.Timezone)
	if err != nil {
		return Cron{}, 0, fieldErr("cron", "%v", err)
	}
	if minEvery <= 0 {
		minEvery = MinEvery
	}
	if c.every > 0 && c.every < minEvery {
		return Cron{}, 0, fieldErr("cron", "%q: a schedule fires at most every %s (@every %s or a five-field cron)",
			req.Cron, minEvery, minEvery)
	}
	switch req.Concurrency {
	case "":
		req.Concurrency = store.ConcurrencyForbid
	case store.ConcurrencyForbid, store.ConcurrencyAllow:
	default:
		return Cron{}, 0, fieldErr("concurrency", "%q is not %q or %q", req.Concurrency, store.ConcurrencyForbid,
			store.ConcurrencyAllow)
	}
	catchUp := DefaultCatchUp
	if req.CatchUp != "" {
		d, err := time.ParseDuration(req.CatchUp)
		if err != nil || d < 0 || d > MaxCatchUp {
			return Cron{}, 0, fieldErr("catch_up", "%q: want a duration from 0s to %s, such as 10m", req.CatchUp, MaxCatchUp)
		}
		catchUp = d
	}
	req.CatchUp = catchUp.String()
	return c, catchUp, nil
}

// Digest fingerprints what an approver of a schedule signs off: all of the
// schedule and the playbook version (number and document digest) its runs
// are made from.
func Digest(s *store.Schedule, version int, playbookDigest string) string {
	var params map[string]string
	_ = json.Unmarshal(s.Params, &params)
	keys := slices.Sorted(maps.Keys(params))
	kv := make([][2]string, len(keys))
	for i, k := range keys {
		kv[i] = [2]string{k, params[k]}
	}
	v := struct {
		Name, Cluster, Playbook string
		Version                 int
		Params                  [][2]string
		Cron, Timezone          string
		Concurrency             string
		CatchUpS                int
		PlaybookVersion         int
		PlaybookDigest          string
	}{s.Name, s.ClusterID, s.Playbook, s.Version, kv, s.Cron, s.Timezone, s.Concurrency, s.CatchUpS, version, playbookDigest}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// runSpace is the name space of run ids derived from schedules (UUID v5).
var runSpace = uuid.MustParse("6f0c8f0e-52b4-4b8e-9a35-5d1c0c1f7a21")

// RunID is the id of the run a schedule's occurrence at t makes: the same
// on every replica and after every restart, so the runs' primary key makes
// one run per occurrence (docs/architecture.md, "Windows and schedules").
func RunID(scheduleID string, t time.Time) string {
	return uuid.NewSHA1(runSpace, []byte(fmt.Sprintf("%s@%d", scheduleID, t.UTC().Unix()))).String()
}

// Due returns the occurrence a schedule should handle at now, if any: the
// most recent one at or before now and less than catchUp old (older missed
// ones are not run late), after the schedule became active (activeSince)
// and after the last one handled.
func Due(c Cron, now time.Time, catchUp time.Duration, activeSince, last *time.Time) (time.Time, bool) {
	at, ok := c.Last(now, catchUp)
	if !ok {
		return time.Time{}, false
	}
	if activeSince != nil && !at.After(*activeSince) {
		return time.Time{}, false
	}
	if last != nil && !at.After(*last) {
		return time.Time{}, false
	}
	return at, true
}

// NextN lists the n occurrences after t.
func NextN(c Cron, t time.Time, n int) []time.Time {
	var out []time.Time
	for i := 0; i < n; i++ {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
