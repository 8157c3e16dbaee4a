package main

import (
	"fmt"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
)

// parseNotBefore reads --not-before: an RFC 3339 time
// (2026-12-01T02:00:00+01:00), or a local time of day (02:00) meaning the
// next such time after now in the local time zone. "" is nil. The core
// checks the bounds (not in the past, at most 90 days ahead).
func parseNotBefore(s string, now time.Time) (*time.Time, error) {
	return parseWhen("--not-before", s, now)
}

// parseWhen reads a time flag as parseNotBefore does (--not-before,
// freeze's --until): an RFC 3339 time or the next local time of day.
func parseWhen(flag, s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return &t, nil
	}
	hm, err := time.Parse("15:04", s)
	if err != nil {
		return nil, cli.UsageError("%s %q: want an RFC 3339 time like 2026-12-01T02:00:00+01:00, or a local time like 02:00", flag, s)
	}
	now = now.In(time.Local)
	t := time.Date(now.Year(), now.Month(), now.Day(), hm.Hour(), hm.Minute(), 0, 0, time.Local)
	if !t.After(now) {
		t = time.Date(now.Year(), now.Month(), now.Day()+1, hm.Hour(), hm.Minute(), 0, 0, time.Local)
	}
	return &t, nil
}

// notBeforeText says when a not_before falls, for the CLI's lines.
func notBeforeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(" not before %s", t.Local().Format(time.RFC3339))
}
