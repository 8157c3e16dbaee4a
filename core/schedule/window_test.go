package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

func mustWindow(t *testing.T, expr string, d time.Duration, tz string) Window {
	t.Helper()
	w, err := NewWindow(expr, d, tz)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A window's duration is checked where the configuration is read
// (ParseCalendar), naming the field: from a minute to 7 days.
func TestACalendarRefusesBadWindowDurations(t *testing.T) {
	t.Parallel()
	for name, d := range map[string]time.Duration{
		"under a minute": 59 * time.Second,
		"zero":           0,
		"over 7 days":    7*24*time.Hour + time.Second,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, bad := ParseCalendar([]WindowSpec{{Cron: "0 2 * * *", Duration: d, Timezone: "UTC"}}, nil, 0)
			if len(bad) != 1 || bad[0].Field != "windows[0].duration" || !errors.Is(bad[0].Err, ErrInvalid) {
				t.Fatalf("ParseCalendar with a %s window = %v, want one ErrInvalid naming windows[0].duration", d, bad)
			}
		})
	}
	for _, d := range []time.Duration{time.Minute, 7 * 24 * time.Hour} {
		if cal, bad := ParseCalendar([]WindowSpec{{Cron: "0 2 * * *", Duration: d, Timezone: "UTC"}}, nil, 0); len(bad) != 0 || len(cal.Windows) != 1 {
			t.Fatalf("ParseCalendar with a %s window = %v, want it accepted", d, bad)
		}
	}
}

func TestNewFreezeRefusesBadSpans(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ from, to, field string }{
		"end before start": {"2026-12-24T00:00:00Z", "2026-12-23T00:00:00Z", "to"},
		"end at start":     {"2026-12-24T00:00:00Z", "2026-12-24T00:00:00Z", "to"},
		"bad from":         {"24.12.2026", "2026-12-27T00:00:00Z", "from"},
		"bad to":           {"2026-12-24T00:00:00Z", "tomorrow", "to"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := NewFreeze(c.from, c.to, "x")
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), c.field+" ") {
				t.Fatalf("NewFreeze = %v, want ErrInvalid naming %s", err, c.field)
			}
		})
	}
}

func TestCalendarAt(t *testing.T) {
	t.Parallel()
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	nightly := mustWindow(t, "0 2 * * *", 4*time.Hour, "Europe/Berlin")
	xmas, err := NewFreeze("2026-12-24T00:00:00+01:00", "2026-12-27T00:00:00+01:00", "holidays")
	if err != nil {
		t.Fatal(err)
	}
	day := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, berlin) }
	cal := &Calendar{Windows: []Window{nightly}, Freezes: []Freeze{xmas}}
	for _, tc := range []struct {
		name       string
		cal        *Calendar
		at         time.Time
		allows     bool
		urgent     bool
		reason     string
		nextChange time.Time
	}{
		{name: "no calendar", cal: nil, at: day(1, 12, 0), allows: true},
		{name: "before the opening", cal: cal, at: day(1, 1, 59), reason: "outside the maintenance window; next opens 2026-12-01T02:00:00+01:00", nextChange: day(1, 2, 0)},
		{name: "urgent outside", cal: cal, at: day(1, 1, 59), urgent: true, allows: true, nextChange: day(1, 2, 0)},
		{name: "at the opening", cal: cal, at: day(1, 2, 0), allows: true, nextChange: day(1, 6, 0)},
		{name: "last minute", cal: cal, at: day(1, 5, 59), allows: true, nextChange: day(1, 6, 0)},
		{name: "at the close", cal: cal, at: day(1, 6, 0), reason: "outside the maintenance window; next opens 2026-12-02T02:00:00+01:00", nextChange: day(2, 2, 0)},
		{name: "in a freeze, in the window", cal: cal, at: day(24, 3, 0), reason: "frozen until 2026-12-27T00:00:00+01:00: holidays", nextChange: day(24, 6, 0)},
		{name: "freeze holds urgent", cal: cal, at: day(25, 3, 0), urgent: true, reason: "frozen until 2026-12-27T00:00:00+01:00: holidays", nextChange: day(25, 6, 0)},
		{name: "freeze ends", cal: cal, at: day(27, 2, 0), allows: true, nextChange: day(27, 6, 0)},
		{name: "next freeze is a change", cal: cal, at: day(23, 7, 0), reason: "outside the maintenance window; next opens 2026-12-24T02:00:00+01:00", nextChange: day(24, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.cal.At(tc.at)
			if got := s.Allows(tc.urgent); got != tc.allows {
				t.Fatalf("Allows(urgent=%v) = %v, want %v (%+v)", tc.urgent, got, tc.allows, s)
			}
			if got := s.Reason(tc.urgent); got != tc.reason {
				t.Fatalf("Reason = %q, want %q", got, tc.reason)
			}
			if got := s.NextChange(); !got.Equal(tc.nextChange) {
				t.Fatalf("NextChange = %v, want %v", got, tc.nextChange)
			}
			if tc.reason != "" && !action.HeldByCalendar(tc.reason) {
				t.Fatalf("HeldByCalendar(%q) = false", tc.reason)
			}
		})
	}
}

func TestCalendarJoinsOverlappingWindowsAndFreezes(t *testing.T) {
	t.Parallel()
	a := mustWindow(t, "0 1 * * *", 2*time.Hour, "UTC") // 01-03
	b := mustWindow(t, "0 2 * * *", 2*time.Hour, "UTC") // 02-04
	f1, _ := NewFreeze("2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z", "first")
	f2, _ := NewFreeze("2026-12-01T11:00:00Z", "2026-12-01T14:00:00Z", "second")
	cal := &Calendar{Windows: []Window{a, b}, Freezes: []Freeze{f1, f2}}
	s := cal.At(time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC))
	if want := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC); !s.InWindow || !s.CloseAt.Equal(want) {
		t.Fatalf("overlapping windows: %+v, want open until %v", s, want)
	}
	s = cal.At(time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC))
	if want := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC); s.Frozen == nil || !s.FrozenUntil.Equal(want) {
		t.Fatalf("overlapping freezes: %+v, want frozen until %v", s, want)
	}
}

// Windows follow the wall clock of their time zone across daylight saving
// time: a 02:00 opening on the night the clocks go back happens once, and
// a window still lasts its duration in real time.
func TestCalendarAcrossDST(t *testing.T) {
	t.Parallel()
	berlin, _ := LoadZone("Europe/Berlin")
	w := mustWindow(t, "0 1 * * *", 3*time.Hour, "Europe/Berlin")
	cal := &Calendar{Windows: []Window{w}}
	// 2026-03-29: clocks go 02:00 CET → 03:00 CEST. The window opens at
	// 01:00 CET (00:00 UTC) and lasts 3 h of real time: until 03:00 UTC, 05:00 CEST.
	open := time.Date(2026, 3, 29, 1, 0, 0, 0, berlin)
	s := cal.At(open.Add(time.Minute))
	if want := time.Date(2026, 3, 29, 5, 0, 0, 0, berlin); !s.InWindow || !s.CloseAt.Equal(want) {
		t.Fatalf("spring: %+v, want open until %v", s, want)
	}
	// 2026-10-25: clocks go 03:00 CEST → 02:00 CET; 01:00 CEST is 23:00 UTC.
	open = time.Date(2026, 10, 25, 1, 0, 0, 0, berlin)
	if got := cal.At(open.Add(-time.Minute)).NextOpen; !got.Equal(open) {
		t.Fatalf("autumn next opening = %v, want %v", got, open)
	}
	s = cal.At(open.Add(time.Minute))
	if want := open.Add(3 * time.Hour); !s.CloseAt.Equal(want) {
		t.Fatalf("autumn: close at %v, want %v (3 h of real time: 03:00 CET)", s.CloseAt, want)
	}
	// A window opening in the hour that does not exist in spring is
	// skipped that day, as the cron library skips it.
	skipped := mustWindow(t, "30 2 * * *", time.Hour, "Europe/Berlin")
	cal = &Calendar{Windows: []Window{skipped}}
	s = cal.At(time.Date(2026, 3, 29, 1, 0, 0, 0, berlin))
	if want := time.Date(2026, 3, 30, 2, 30, 0, 0, berlin); s.InWindow || !s.NextOpen.Equal(want) {
		t.Fatalf("skipped opening: %+v, want next opening %v", s, want)
	}
}

func TestEveryWindowOpensOnTheEpochGrid(t *testing.T) {
	t.Parallel()
	w := mustWindow(t, "@every 4m", 2*time.Minute, "")
	cal := &Calendar{Windows: []Window{w}}
	base := time.Unix(1_800_000_000-1_800_000_000%240, 0)
	if s := cal.At(base.Add(time.Minute)); !s.InWindow || !s.CloseAt.Equal(base.Add(2*time.Minute)) {
		t.Fatalf("in the first half: %+v", s)
	}
	if s := cal.At(base.Add(3 * time.Minute)); s.InWindow || !s.NextOpen.Equal(base.Add(4*time.Minute)) {
		t.Fatalf("in the second half: %+v", s)
	}
}

func TestCalendarsOfACluster(t *testing.T) {
	t.Parallel()
	var none Calendars
	if none.Of("c") != nil {
		t.Fatal("nil Calendars have a calendar")
	}
	cal := &Calendar{Freezes: []Freeze{{From: time.Unix(0, 0), To: time.Unix(10, 0)}}}
	if (Calendars{"c": cal}).Of("c") != cal || (Calendars{"c": cal}).Of("d") != nil {
		t.Fatal("Of does not return the cluster's calendar")
	}
}

func TestCheckNotBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		at time.Time
		ok bool
	}{
		"now":               {now, true},
		"within the skew":   {now.Add(-59 * time.Second), true},
		"in the past":       {now.Add(-61 * time.Second), false},
		"in 90 days":        {now.Add(90 * 24 * time.Hour), true},
		"beyond 90 days":    {now.Add(90*24*time.Hour + time.Second), false},
		"tomorrow at 02:00": {time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC), true},
	} {
		err := CheckNotBefore(c.at, now)
		if (err == nil) != c.ok || (err != nil && (!errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "not_before "))) {
			t.Errorf("%s: CheckNotBefore = %v, want ok=%v and the field named", name, err, c.ok)
		}
	}
}

func TestAWindowThatOpensTooOftenWithinItselfIsRefused(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		cron string
		d    time.Duration
		ok   bool
	}{
		"every minute for a week":      {"* * * * *", 168 * time.Hour, false},
		"every minute on the 1st, 2 h": {"* * 1 * *", 2 * time.Hour, false},
		"@every 1s for an hour":        {"@every 1s", time.Hour, false},
		"nightly for 4 h":              {"0 2 * * *", 4 * time.Hour, true},
		"every minute for 90 minutes":  {"* * * * *", 90 * time.Minute, true},
		"@every 4s for 2 s":            {"@every 4s", 2 * time.Second, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cal, bad := ParseCalendar([]WindowSpec{{Cron: c.cron, Duration: c.d}}, nil, time.Second)
			if c.ok {
				if len(bad) > 0 || cal == nil {
					t.Fatalf("refused: %v", bad)
				}
				return
			}
			if len(bad) != 1 || bad[0].Field != "windows[0].cron" || !errors.Is(bad[0].Err, ErrInvalid) {
				t.Fatalf("got %v, want one error on windows[0].cron", bad)
			}
		})
	}
}

func TestACalendarHasAtMost32WindowsAnd64Freezes(t *testing.T) {
	t.Parallel()
	ws := make([]WindowSpec, MaxWindows+1)
	for i := range ws {
		ws[i] = WindowSpec{Cron: "0 2 * * *", Duration: time.Hour}
	}
	if _, bad := ParseCalendar(ws, nil, 0); len(bad) != 1 || bad[0].Field != "windows" {
		t.Fatalf("%d windows: %v, want one error on windows", len(ws), bad)
	}
	if _, bad := ParseCalendar(ws[:MaxWindows], nil, 0); len(bad) != 0 {
		t.Fatalf("%d windows refused: %v", MaxWindows, bad)
	}
	fs := make([]FreezeSpec, MaxFreezes+1)
	for i := range fs {
		fs[i] = FreezeSpec{From: "2026-12-24T00:00:00Z", To: "2026-12-25T00:00:00Z"}
	}
	if _, bad := ParseCalendar(nil, fs, 0); len(bad) != 1 || bad[0].Field != "freezes" {
		t.Fatalf("%d freezes: %v, want one error on freezes", len(fs), bad)
	}
}
