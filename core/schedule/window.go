package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Bounds of a maintenance window's duration.
const (
	MinWindow = time.Minute
	MaxWindow = 7 * 24 * time.Hour
	// MaxWindows and MaxFreezes bound a cluster's calendar: every
	// question to it (a viewer's GET of the cluster too) walks them all.
	MaxWindows = 32
	MaxFreezes = 64
)

// Window is a recurring maintenance window: it opens at every occurrence of
// Cron and stays open for Duration (the opening included, its end not).
type Window struct {
	Cron     Cron
	Duration time.Duration
}

// Freeze is a span in which no disruptive work goes, urgent or not: from
// From (included) to To (not included).
type Freeze struct {
	From, To time.Time
	Reason   string
	// ID is the stored freeze's id ("" for one built here).
	ID string
}

// Calendar is a cluster's windows and freezes. With no windows, the
// cluster is open whenever it is not frozen.
type Calendar struct {
	Windows []Window
	Freezes []Freeze
	// Closed, when set, says why no window is open at any time: the
	// cluster has windows but none of them reads (fail closed, not open).
	Closed string
}

// NewWindow is a window opening at expr in zone tz for d. Its bounds are
// checked where the configuration is read (ParseCalendar).
func NewWindow(expr string, d time.Duration, tz string) (Window, error) {
	c, err := ParseCron(expr, tz)
	if err != nil {
		return Window{}, err
	}
	return Window{Cron: c, Duration: d}, nil
}

// NewFreeze parses a freeze as configured: RFC 3339 times, To after From.
func NewFreeze(from, to, reason string) (Freeze, error) {
	f, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return Freeze{}, fmt.Errorf("from %q: %w: not an RFC 3339 time such as 2026-12-24T00:00:00+01:00", from, ErrInvalid)
	}
	t, err := time.Parse(time.RFC3339, to)
	if err != nil {
		return Freeze{}, fmt.Errorf("to %q: %w: not an RFC 3339 time such as 2026-12-27T00:00:00+01:00", to, ErrInvalid)
	}
	if !t.After(f) {
		return Freeze{}, fmt.Errorf("to %q: %w: must be after from %q", to, ErrInvalid, from)
	}
	return Freeze{From: f, To: t, Reason: reason}, nil
}

// Empty reports whether the calendar restricts nothing.
func (c *Calendar) Empty() bool {
	return c == nil || len(c.Windows) == 0 && len(c.Freezes) == 0 && c.Closed == ""
}

// CalendarStatus is what a calendar says at one instant.
type CalendarStatus struct {
	At time.Time
	// InWindow: a window is open at At, or the calendar has none.
	InWindow bool
	// Windowed: the calendar has windows.
	Windowed bool
	// CloseAt: when InWindow and Windowed, when the open windows close
	// (overlapping and back-to-back windows joined).
	CloseAt time.Time
	// NextOpen: when not InWindow, the next opening of a window.
	NextOpen time.Time
	// Frozen is the freeze in force at At, if any; FrozenUntil is when the
	// freezes in force end (overlapping freezes joined).
	Frozen      *Freeze
	FrozenUntil time.Time
	// NextFreeze is the next freeze to begin after At, if any.
	NextFreeze *Freeze
}

// maxChain bounds the joining of overlapping windows or freezes. Past it,
// CloseAt is earlier than the true close; that is safe, since the gate asks
// again at CloseAt and finds the window still open.
const maxChain = 8

// MaxOpeningsPerWindow bounds how often a window's cron may open within its
// own duration. Each question to a calendar walks the openings within a
// window's duration, and a viewer's GET asks one: `* * * * *` with 168h
// would be 10,080 steps for an always-open window.
const MaxOpeningsPerWindow = 100

// tooDense reports whether c opens more than MaxOpeningsPerWindow times
// within some span d among its next openings after from.
func tooDense(c Cron, d time.Duration, from time.Time) bool {
	const look = 1000
	opens := make([]time.Time, 0, look+MaxOpeningsPerWindow+1)
	at := from
	for range look + MaxOpeningsPerWindow + 1 {
		n := c.Next(at)
		if n.IsZero() {
			break
		}
		opens = append(opens, n)
		at = n
	}
	for i := 0; i+MaxOpeningsPerWindow < len(opens); i++ {
		if opens[i+MaxOpeningsPerWindow].Sub(opens[i]) < d {
			return true
		}
	}
	return false
}

// At says whether disruptive work may go at t, and until or from when.
func (c *Calendar) At(t time.Time) CalendarStatus {
	s := CalendarStatus{At: t, InWindow: true}
	if c == nil {
		return s
	}
	s.Windowed = len(c.Windows) > 0 || c.Closed != ""
	if c.Closed != "" {
		s.InWindow = false
	} else if s.Windowed {
		end, open := c.windowEnd(t)
		s.InWindow = open
		if open {
			s.CloseAt = end
		} else {
			s.NextOpen = c.nextOpening(t)
		}
	}
	if f, until := c.frozen(t); f != nil {
		s.Frozen, s.FrozenUntil = f, until
	}
	for i := range c.Freezes {
		f := &c.Freezes[i]
		if f.From.After(t) && (s.NextFreeze == nil || f.From.Before(s.NextFreeze.From)) {
			s.NextFreeze = f
		}
	}
	return s
}

// windowEnd is whether a window is open at t and, if so, when the open
// windows close (following windows that open before the last one closes).
func (c *Calendar) windowEnd(t time.Time) (time.Time, bool) {
	var end time.Time
	at := t
	for range maxChain {
		next := end
		for _, w := range c.Windows {
			if open, ok := w.Cron.Last(at, w.Duration); ok {
				if e := open.Add(w.Duration); e.After(at) && e.After(next) {
					next = e
				}
			}
		}
		if !next.After(end) {
			break
		}
		end, at = next, next
	}
	return end, !end.IsZero()
}

// nextOpening is the first opening of any window after t.
func (c *Calendar) nextOpening(t time.Time) time.Time {
	var first time.Time
	for _, w := range c.Windows {
		if n := w.Cron.Next(t); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}

// frozen is the freeze in force at t (the one ending last) and when the
// freezes in force end, joined with those that begin before it.
func (c *Calendar) frozen(t time.Time) (*Freeze, time.Time) {
	var in *Freeze
	until := t
	for range maxChain {
		moved := false
		for i := range c.Freezes {
			f := &c.Freezes[i]
			if !f.From.After(until) && f.To.After(until) {
				if in == nil || f.To.After(in.To) {
					in = f
				}
				until, moved = f.To, true
			}
		}
		if !moved {
			break
		}
	}
	if in == nil {
		return nil, time.Time{}
	}
	return in, until
}

// Allows reports whether disruptive work may go: never in a freeze; in a
// window (or with no windows), or outside one when urgent.
func (s CalendarStatus) Allows(urgent bool) bool {
	return s.Frozen == nil && (s.InWindow || urgent)
}

// Reason says why disruptive work waits (the state_reason of what the
// calendar holds), "" when Allows(urgent).
func (s CalendarStatus) Reason(urgent bool) string {
	switch {
	case s.Frozen != nil:
		r := action.ReasonFrozen + s.FrozenUntil.Format(time.RFC3339)
		if s.Frozen.Reason != "" {
			r += ": " + s.Frozen.Reason
		}
		return r
	case !s.InWindow && !urgent:
		if s.NextOpen.IsZero() {
			return action.ReasonOutsideWindow + "; no window opens again"
		}
		return action.ReasonOutsideWindow + "; next opens " + s.NextOpen.Format(time.RFC3339)
	}
	return ""
}

// NextChange is the first instant after s.At at which what the calendar
// allows may change: a window opens or closes, a freeze begins or ends.
// Zero when nothing will change.
func (s CalendarStatus) NextChange() time.Time {
	var first time.Time
	for _, t := range []time.Time{s.CloseAt, s.NextOpen, s.FrozenUntil} {
		if t.After(s.At) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if s.NextFreeze != nil && (first.IsZero() || s.NextFreeze.From.Before(first)) {
		first = s.NextFreeze.From
	}
	return first
}

// Calendars maps a cluster id to its calendar; a cluster not listed is
// always open. A running core holds them in a live.Value, which a reload
// replaces.
type Calendars map[string]*Calendar

// Of returns the calendar of a cluster, nil when it has none.
func (c Calendars) Of(cluster string) *Calendar { return c[cluster] }

// WindowSpec is one entry of a cluster's `windows:` configuration.
type WindowSpec struct {
	Cron     string        `mapstructure:"cron" yaml:"cron" json:"cron"`
	Duration time.Duration `mapstructure:"duration" yaml:"duration" json:"-"`
	Timezone string        `mapstructure:"timezone" yaml:"timezone" json:"timezone"`
}

// FreezeSpec is one entry of a cluster's `freezes:` configuration: RFC 3339
// times.
type FreezeSpec struct {
	From   string `mapstructure:"from" yaml:"from" json:"from"`
	To     string `mapstructure:"to" yaml:"to" json:"to"`
	Reason string `mapstructure:"reason" yaml:"reason" json:"reason"`
}

// CalendarError is a bad field of a calendar's configuration: Field is its
// key below the cluster ("windows[0].cron").
type CalendarError struct {
	Field string
	Err   error
}

// ParseCalendar builds a calendar from its configuration; it returns every
// bad field at once, and a nil calendar when there is nothing to keep.
// minWindow replaces MinWindow when set (never below a second).
func ParseCalendar(windows []WindowSpec, freezes []FreezeSpec, minWindow time.Duration) (*Calendar, []CalendarError) {
	least := MinWindow
	if minWindow > 0 {
		least = max(minWindow, time.Second)
	}
	var bad []CalendarError
	if len(windows) > MaxWindows {
		bad = append(bad, CalendarError{"windows", fmt.Errorf("%w: %d windows, at most %d", ErrInvalid, len(windows), MaxWindows)})
		windows = nil
	}
	if len(freezes) > MaxFreezes {
		bad = append(bad, CalendarError{"freezes", fmt.Errorf("%w: %d freezes, at most %d; remove those that ended", ErrInvalid, len(freezes), MaxFreezes)})
		freezes = nil
	}
	cal := &Calendar{}
	for i, w := range windows {
		key := fmt.Sprintf("windows[%d]", i)
		ok := true
		if _, err := LoadZone(w.Timezone); err != nil {
			bad, ok = append(bad, CalendarError{key + ".timezone", err}), false
		}
		if _, err := ParseCron(w.Cron, ""); err != nil {
			bad, ok = append(bad, CalendarError{key + ".cron", err}), false
		}
		if w.Duration < least || w.Duration > MaxWindow {
			bad, ok = append(bad, CalendarError{key + ".duration", fmt.Errorf("%w: must be from %s to 168h (7 days), got %s", ErrInvalid, least, w.Duration)}), false
		}
		if !ok {
			continue
		}
		c, err := ParseCron(w.Cron, w.Timezone)
		if err != nil {
			bad = append(bad, CalendarError{key, err})
			continue
		}
		if tooDense(c, w.Duration, time.Now()) {
			bad = append(bad, CalendarError{key + ".cron", fmt.Errorf("%w: %q opens more than %d times within the window's %s; open it less often or shorten it", ErrInvalid, w.Cron, MaxOpeningsPerWindow, w.Duration)})
			continue
		}
		cal.Windows = append(cal.Windows, Window{Cron: c, Duration: w.Duration})
	}
	for i, f := range freezes {
		key := fmt.Sprintf("freezes[%d]", i)
		fr, err := NewFreeze(f.From, f.To, f.Reason)
		if err != nil {
			field, _, _ := strings.Cut(err.Error(), " ")
			bad = append(bad, CalendarError{key + "." + field, err})
			continue
		}
		cal.Freezes = append(cal.Freezes, fr)
	}
	if len(bad) > 0 || cal.Empty() {
		return nil, bad
	}
	return cal, nil
}

// Bounds of a not_before: not in the past (beyond a small clock skew
// between the caller and the core), not further ahead than MaxAhead.
const (
	NotBeforeSkew     = time.Minute
	NotBeforeMaxAhead = 90 * 24 * time.Hour
)

// CheckNotBefore refuses a not_before in the past or more than 90 days
// after now.
func CheckNotBefore(t, now time.Time) error {
	switch {
	case t.Before(now.Add(-NotBeforeSkew)):
		return fmt.Errorf("not_before %s: %w: it is in the past", t.Format(time.RFC3339), ErrInvalid)
	case t.After(now.Add(NotBeforeMaxAhead)):
		return fmt.Errorf("not_before %s: %w: more than 90 days ahead", t.Format(time.RFC3339), ErrInvalid)
	}
	return nil
}

// WaitingForTime counts the actions of open that wait in PENDING_SCHEDULE
// for a window, the end of a freeze or their not_before: the "waiting" of a
// cluster's calendar as the API and the web UI show it.
func WaitingForTime(open []store.Record) int {
	n := 0
	for i := range open {
		if open[i].State == action.PendingSchedule && action.HeldForTime(open[i].StateReason) {
			n++
		}
	}
	return n
}

// CalendarView is a cluster's calendar as the API and the web UI show it, at now,
// with waiting actions held by it.
func CalendarView(cal *Calendar, now time.Time, waiting int) *wire.Calendar {
	st := cal.At(now)
	out := &wire.Calendar{Windows: []wire.Window{}, Freezes: []wire.Freeze{}, Open: st.Allows(false),
		InWindow: st.InWindow, Waiting: waiting}
	for _, w := range cal.Windows {
		out.Windows = append(out.Windows, wire.Window{Cron: w.Cron.String(), Duration: w.Duration.String(),
			Timezone: w.Cron.Location().String(), DurationS: int64(w.Duration / time.Second)})
	}
	for _, f := range cal.Freezes {
		out.Freezes = append(out.Freezes, wire.Freeze{ID: f.ID, From: f.From, To: f.To, Reason: f.Reason})
	}
	if !st.CloseAt.IsZero() {
		out.CloseAt = &st.CloseAt
	}
	if !st.NextOpen.IsZero() {
		out.NextOpen = &st.NextOpen
	}
	if st.Frozen != nil {
		out.Frozen = &wire.Freeze{ID: st.Frozen.ID, From: st.Frozen.From, To: st.FrozenUntil, Reason: st.Frozen.Reason}
	}
	return out
}
