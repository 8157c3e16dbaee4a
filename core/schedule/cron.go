// Package schedule decides when work may go: maintenance windows and
// freezes per cluster, later starts (not_before) and approved schedules.
// Cron expressions are parsed by robfig/cron/v3, which handles time zones
// and daylight saving time; this file only anchors `@every` so that every
// replica and every restart computes the same occurrences.
//
// See docs/architecture.md, "Windows and schedules".
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalid is wrapped by every error about a bad cron expression or time
// zone, so callers can answer 400 (or refuse a config) naming the field.
var ErrInvalid = errors.New("invalid")

// parser accepts the five standard fields and the descriptors (@daily,
// @every 1h30m, …). A CRON_TZ= prefix is refused: the time zone is its own
// field.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron is a parsed cron expression in a time zone. Its zero value is not
// usable; build one with ParseCron.
type Cron struct {
	expr  string
	loc   *time.Location
	spec  cron.Schedule
	every time.Duration // set for "@every D": occurrences are multiples of D since the Unix epoch
}

// ParseCron parses expr in the time zone tz (an IANA name such as
// Europe/Berlin; empty means UTC).
func ParseCron(expr, tz string) (Cron, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return Cron{}, fmt.Errorf("cron: %w: empty", ErrInvalid)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Cron{}, fmt.Errorf("cron %q: %w: give the time zone in its own field, not as a prefix", expr, ErrInvalid)
	}
	loc, err := LoadZone(tz)
	if err != nil {
		return Cron{}, err
	}
	spec, err := parser.Parse(expr)
	if err != nil {
		return Cron{}, fmt.Errorf("cron %q: %w: %v", expr, ErrInvalid, err)
	}
	c := Cron{expr: expr, loc: loc, spec: spec}
	if d, ok := spec.(cron.ConstantDelaySchedule); ok {
		c.every = d.Delay
	} else if c.Next(time.Now()).IsZero() {
		// robfig looks five years ahead: any date that exists comes
		// round within four (29 February); "0 0 30 2 *" never does.
		return Cron{}, fmt.Errorf("cron %q: %w: never fires (no such day in five years)", expr, ErrInvalid)
	}
	return c, nil
}

// LoadZone loads an IANA time zone; empty means UTC. "Local" is refused: a
// replica's local zone is not something two replicas agree on.
func LoadZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf("timezone %q: %w: name a zone such as Europe/Berlin", tz, ErrInvalid)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w: unknown zone", tz, ErrInvalid)
	}
	return loc, nil
}

// String is the expression as given.
func (c Cron) String() string { return c.expr }

// Location is the time zone the expression is read in.
func (c Cron) Location() *time.Location { return c.loc }

// Next is the first occurrence strictly after t, in the cron's time zone.
// For "@every D" the occurrences are the multiples of D since the Unix
// epoch, the same on every replica whenever it asks.
func (c Cron) Next(t time.Time) time.Time {
	if c.every > 0 {
		n := t.UnixNano()
		d := int64(c.every)
		next := (n/d + 1) * d
		if n < 0 && n%d != 0 {
			next = (n / d) * d
		}
		return time.Unix(0, next).In(c.loc)
	}
	return c.spec.Next(t.In(c.loc))
}

// Last is the latest occurrence at or before t and after t-within, and
// whether there is one. A window is open at t when Last(t, duration) finds
// an opening; a schedule's missed occurrence is Last(now, catchUp).
func (c Cron) Last(t time.Time, within time.Duration) (time.Time, bool) {
	if c.every > 0 {
		// Arithmetic, as Next: a walk would stop at its bound long
		// before now for "@every 1s" across a day of catch_up.
		d, n := int64(c.every), t.UnixNano()
		last := n / d * d
		if n < 0 && n%d != 0 {
			last -= d
		}
		if last <= t.Add(-within).UnixNano() {
			return time.Time{}, false
		}
		return time.Unix(0, last).In(c.loc), true
	}
	var last time.Time
	found := false
	// Walk forward from the start of the span: a five-field expression
	// fires at most every minute, so a week (the longest window) holds
	// 10,080 occurrences, within the bound.
	at := t.Add(-within)
	for i := 0; i < 20000; i++ {
		n := c.Next(at)
		if n.IsZero() || n.After(t) {
			break
		}
		last, found, at = n, true, n
	}
	return last, found
}
