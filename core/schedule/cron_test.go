package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/wire"
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

// Issue 30, item 6: a cron that never fires is refused when parsed (robfig
// would answer the zero time for ever), and a schedule's @every below its
// minimum is refused by Check, with an error naming the field.
func TestCronsThatNeverFireAndTooFrequentSchedulesAreRefused(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4 *", "0 3 31 4,6,9,11 *", "0 0 30,31 2 *"} {
		if _, err := ParseCron(expr, "Europe/Berlin"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "never") {
			t.Errorf("ParseCron(%q) = %v, want an ErrInvalid saying it never fires", expr, err)
		}
	}
	for _, expr := range []string{"0 0 29 2 *", "0 0 31 * *", "@yearly", "@every 1h"} {
		if _, err := ParseCron(expr, ""); err != nil {
			t.Errorf("ParseCron(%q) = %v", expr, err)
		}
	}
	req := func(cron string) *wire.CreateScheduleRequest {
		return &wire.CreateScheduleRequest{Name: "n", Cluster: "c", Playbook: "p", Cron: cron}
	}
	for _, cron := range []string{"@every 1ns", "@every 0s", "@every 1s", "@every 59s", "@every 59.9s"} {
		_, _, err := Check(req(cron), 0)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "cron" || !strings.Contains(fe.Msg, MinEvery.String()) {
			t.Errorf("Check(%q) = %v, want a cron error naming the minimum", cron, err)
		}
	}
	for _, cron := range []string{"@every 1m", "@every 90m", "* * * * *"} {
		if _, _, err := Check(req(cron), 0); err != nil {
			t.Errorf("Check(%q) = %v", cron, err)
		}
	}
	if _, _, err := Check(req("@every 1s"), time.Second); err != nil {
		t.Errorf("Check(@every 1s) with a minimum of 1s: %v", err)
	}
}
