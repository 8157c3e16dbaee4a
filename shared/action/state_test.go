package action

import "testing"

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	allowed := map[[2]State]bool{
		{PendingApprove, PendingSchedule}: true,
		{PendingApprove, Cancelled}:       true,
		{PendingSchedule, New}:            true,
		{PendingSchedule, Running}:        true,
		{PendingSchedule, Done}:           true,
		{PendingSchedule, Failed}:         true,
		{PendingSchedule, Cancelled}:      true,
		{PendingSchedule, Lost}:           true,
		{PendingSchedule, PendingApprove}: true,
		{New, Running}:                    true,
		{New, Cancelled}:                  true,
		{New, Lost}:                       true,
		{Running, Done}:                   true,
		{Running, Failed}:                 true,
		{Running, Cancelled}:              true,
		{Running, Lost}:                   true,
	}
	// Every pair of states is checked: the allowed ones above, and every other one refused.
	for _, from := range States {
		for _, to := range States {
			want := allowed[[2]State{from, to}]
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				t.Parallel()
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
				}
				err := CheckTransition(from, to)
				if (err == nil) != want {
					t.Fatalf("CheckTransition(%s, %s) = %v, want allowed=%v", from, to, err, want)
				}
			})
		}
	}
}

func TestFinalStatesNeverChange(t *testing.T) {
	t.Parallel()
	for _, from := range States {
		if !from.Final() {
			continue
		}
		for _, to := range States {
			if CanReach(from, to) {
				t.Errorf("final state %s can reach %s", from, to)
			}
		}
	}
}

func TestCanReach(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to State
		want     bool
	}{
		{New, Done, true},
		{PendingSchedule, Done, true},
		{PendingApprove, Done, true},
		{Running, New, false},
		{Done, Running, false},
		{New, PendingSchedule, false},
	}
	for _, c := range cases {
		if got := CanReach(c.from, c.to); got != c.want {
			t.Errorf("CanReach(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

func TestParseState(t *testing.T) {
	t.Parallel()
	if s, err := ParseState("DONE"); err != nil || s != Done {
		t.Fatalf("ParseState(DONE) = %q, %v", s, err)
	}
	if _, err := ParseState("done"); err == nil {
		t.Fatal("ParseState accepted a lowercase state")
	}
}
