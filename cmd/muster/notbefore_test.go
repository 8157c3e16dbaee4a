package main

import (
	"testing"
	"time"
)

func TestParseNotBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 22, 30, 0, 0, time.Local)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "2026-12-01T02:00:00+01:00", want: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)},
		{in: "23:15", want: time.Date(2026, 11, 25, 23, 15, 0, 0, time.Local)},
		{in: "02:00", want: time.Date(2026, 11, 26, 2, 0, 0, 0, time.Local)},
		{in: "22:30", want: time.Date(2026, 11, 26, 22, 30, 0, 0, time.Local)}, // now is not after now
		{in: "2am", bad: true},
		{in: "25:00", bad: true},
		{in: "2026-12-01 02:00", bad: true},
	} {
		got, err := parseNotBefore(c.in, now)
		if c.bad {
			if err == nil {
				t.Errorf("%q: %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got == nil || !got.Equal(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got, err := parseNotBefore("", now); got != nil || err != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
}
