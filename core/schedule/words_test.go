package schedule

import "testing"

// Describe says the common shapes of cron in words and gives up ("") on the
// rest, never saying something the expression does not mean.
func TestDescribeSaysCommonCronInWords(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"0 2 * * *":       "at 02:00 every day",
		"30 14 * * 1-5":   "at 14:30 Monday through Friday",
		"0 3 * * 0":       "at 03:00 on Sundays",
		"0 3 * * 6,7":     "at 03:00 on Saturdays and Sundays",
		"0 2,14 * * *":    "at 02:00 and 14:00 every day",
		"*/15 * * * *":    "every 15 minutes",
		"* * * * *":       "every minute",
		"5 * * * *":       "at minute 5 of every hour",
		"0 */6 * * *":     "every 6 hours at minute 0",
		"*/7 * * * *":     "", // :00, :07 … :56, then :00 again: not every 7 minutes
		"*/45 * * * *":    "",
		"*/20 * * * *":    "every 20 minutes",
		"0 */5 * * *":     "", // 00:00 … 20:00, then 00:00 again
		"0 */8 * * *":     "every 8 hours at minute 0",
		"0 4 1 * *":       "at 04:00 on day 1 of every month",
		"@daily":          "at 00:00 every day",
		"@hourly":         "every hour, on the hour",
		"0 2 * 1 *":       "", // a month: not described
		"0 2 1 * 1":       "", // day of month and of week: cron's "or", not described
		"0-10 2 * * *":    "",
		"0 2 * * 5-1":     "",
		"0 24 * * *":      "",
		"07 2 * * *":      "",
		"0 2 * * MON-FRI": "",
		"not cron":        "",
	} {
		if got := Describe(expr); got != want {
			t.Errorf("Describe(%q) = %q, want %q", expr, got, want)
		}
	}
}
