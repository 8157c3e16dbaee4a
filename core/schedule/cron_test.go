package schedule

import (
	"errors"
	"testing"
	"time"
)

func TestParseCronRefusesBadInput(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ expr, tz string }{
		"empty":        {"", ""},
		"six fields":   {"0 0 2 * * *", ""},
		"out of range": {"61 * * * *", ""},
		"bad zone":     {"0 2 * * *", "Mars/Olympus"},
		"local zone":   {"0 2 * * *", "Local"},
		"tz prefix":    {"CRON_TZ=UTC 0 2 * * *", ""},
		"bad every":    {"@every soon", ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseCron(c.expr, c.tz); !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseCron(%q, %q) = %v, want ErrInvalid", c.expr, c.tz, err)
			}
		})
	}
}

func TestCronNextIsInItsTimeZoneAcrossDST(t *testing.T) {
	t.Parallel()
	c, err := ParseCron("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	berlin := c.Location()
	// 2026-03-29 has no 02:30 in Berlin (clocks go 02:00 → 03:00): the
	// library skips that day, as cron does.
	got := c.Next(time.Date(2026, 3, 28, 12, 0, 0, 0, berlin))
	if want := time.Date(2026, 3, 30, 2, 30, 0, 0, berlin); !got.Equal(want) {
		t.Fatalf("Next across spring DST = %v, want %v", got, want)
	}
	got = c.Next(time.Date(2026, 7, 1, 3, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 7, 2, 0, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next in summer = %v, want %v (02:30 CEST)", got, want)
	}
}

func TestEveryIsAnchoredToTheEpoch(t *testing.T) {
	t.Parallel()
	c, err := ParseCron("@every 3s", "")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1_800_000_000, 0) // a multiple of 3 s
	for _, off := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, 2999 * time.Millisecond} {
		if got, want := c.Next(base.Add(off)), base.Add(3*time.Second); !got.Equal(want) {
			t.Fatalf("Next(base+%v) = %v, want %v", off, got, want)
		}
	}
}

func TestLastFindsTheOpeningWithinTheSpan(t *testing.T) {
	t.Parallel()
	c, err := ParseCron("0 2 * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	open := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{open.Add(-time.Minute), false},
		{open, true},
		{open.Add(3*time.Hour + 59*time.Minute), true},
		{open.Add(4 * time.Hour), false}, // the span is (t-4h, t]
	} {
		got, ok := c.Last(tc.at, 4*time.Hour)
		if ok != tc.want || (ok && !got.Equal(open)) {
			t.Fatalf("Last(%v, 4h) = %v, %v; want %v", tc.at, got, ok, tc.want)
		}
	}
}

// A frequent "@every" across a long span: Last is the latest occurrence,
// not one the walk stopped at, so that a schedule with a day of catch_up
// handles its newest occurrence and no stale one.
func TestCronLastOfAFrequentEveryIsTheLatest(t *testing.T) {
	t.Parallel()
	c, err := ParseCron("@every 1s", "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 500e6, time.UTC)
	want := now.Truncate(time.Second)
	for _, within := range []time.Duration{MaxCatchUp, MaxWindow} {
		if got, ok := c.Last(now, within); !ok || !got.Equal(want) {
			t.Errorf("Last(now, %s) = %v, %v; want %v, true", within, got, ok, want)
		}
	}
	if _, ok := c.Last(now, 400*time.Millisecond); ok {
		t.Error("Last within 400ms of 12:00:00.5 found an occurrence; the last one is 500ms old")
	}
	since := now.Add(-10 * time.Second)
	if at, due := Due(c, now, MaxCatchUp, &since, nil); !due || !at.Equal(want) {
		t.Errorf("Due with a day of catch_up, active 10s = %v, %v; want %v, true", at, due, want)
	}
}
