package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// Describe says a cron expression in words for the common shapes ("at 02:00
// every day", "every 15 minutes", "at 02:00 Monday through Friday"), and ""
// for any other, which pages then show as the expression alone. It does not
// validate: ParseCron does.
func Describe(expr string) string {
	switch strings.TrimSpace(expr) {
	case "@hourly":
		return "every hour, on the hour"
	case "@daily", "@midnight":
		return "at 00:00 every day"
	case "@weekly":
		return "at 00:00 on Sundays"
	case "@monthly":
		return "at 00:00 on day 1 of every month"
	case "@yearly", "@annually":
		return "at 00:00 on 1 January"
	}
	f := strings.Fields(expr)
	if len(f) != 5 || f[3] != "*" {
		return ""
	}
	min, hour, dom, dow := f[0], f[1], f[2], f[4]
	if min == "*" {
		min = "*/1"
	}
	// */N fires at 0, N, 2N… within each hour (each day for hours) and
	// starts again there: "every N" holds only when N divides 60 (24).
	if n, ok := every(min); ok && hour == "*" && dom == "*" && dow == "*" {
		if 60%n != 0 {
			return ""
		}
		if n == 1 {
			return "every minute"
		}
		return fmt.Sprintf("every %d minutes", n)
	}
	m, ok := number(min, 0, 59)
	if !ok {
		return ""
	}
	var when string
	switch n, isEvery := every(hour); {
	case hour == "*":
		when = fmt.Sprintf("at minute %d of every hour", m)
	case isEvery:
		if 24%n != 0 {
			return ""
		}
		when = fmt.Sprintf("every %d hours at minute %d", n, m)
	default:
		var times []string
		for _, h := range strings.Split(hour, ",") {
			hh, ok := number(h, 0, 23)
			if !ok {
				return ""
			}
			times = append(times, fmt.Sprintf("%02d:%02d", hh, m))
		}
		when = "at " + and(times)
	}
	switch {
	case dom == "*" && dow == "*":
		if hour == "*" || strings.HasPrefix(when, "every") {
			return when
		}
		return when + " every day"
	case dom != "*" && dow == "*":
		d, ok := number(dom, 1, 31)
		if !ok {
			return ""
		}
		return fmt.Sprintf("%s on day %d of every month", when, d)
	case dom == "*":
		days, ok := weekdays(dow)
		if !ok {
			return ""
		}
		return when + " " + days
	}
	return ""
}

var dayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// weekdays says a day-of-week field: a day, a range or a list of days.
func weekdays(f string) (string, bool) {
	if lo, hi, ok := strings.Cut(f, "-"); ok {
		a, ok1 := number(lo, 0, 7)
		b, ok2 := number(hi, 0, 7)
		if !ok1 || !ok2 || a >= b {
			return "", false
		}
		return dayNames[a] + " through " + dayNames[b], true
	}
	var days []string
	for _, d := range strings.Split(f, ",") {
		n, ok := number(d, 0, 7)
		if !ok {
			return "", false
		}
		days = append(days, dayNames[n]+"s")
	}
	return "on " + and(days), true
}

// every reads "*/N".
func every(f string) (int, bool) {
	rest, ok := strings.CutPrefix(f, "*/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// number reads a plain number within [lo, hi].
func number(f string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(f)
	return n, err == nil && n >= lo && n <= hi && strconv.Itoa(n) == f
}

// and joins words as a sentence does: "a", "a and b", "a, b and c".
func and(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
