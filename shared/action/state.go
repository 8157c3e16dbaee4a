package action

import "fmt"

// State is where an action is in its life.
type State string

// The states of docs/architecture.md, "Actions".
const (
	PendingApprove  State = "PENDING_APPROVE"
	PendingSchedule State = "PENDING_SCHEDULE"
	New             State = "NEW"
	Running         State = "RUNNING"
	Done            State = "DONE"
	Failed          State = "FAILED"
	Cancelled       State = "CANCELLED"
	Lost            State = "LOST"
)

// States lists every state in life-cycle order.
var States = []State{PendingApprove, PendingSchedule, New, Running, Done, Failed, Cancelled, Lost}

// transitions is the one table of allowed moves. Anything absent is refused.
var transitions = map[State][]State{
	PendingApprove:  {PendingSchedule, Cancelled},
	PendingSchedule: {New, Running, Done, Failed, Cancelled, Lost, PendingApprove},
	New:             {Running, Cancelled, Lost},
	Running:         {Done, Failed, Cancelled, Lost},
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, k := range States {
		if k == s {
			return true
		}
	}
	return false
}

// Final reports whether s can never change again.
func (s State) Final() bool {
	switch s {
	case Done, Failed, Cancelled, Lost:
		return true
	}
	return false
}

// OnAgent reports whether s is a state the agent holds (NEW and beyond, LOST excepted).
func (s State) OnAgent() bool {
	switch s {
	case New, Running, Done, Failed, Cancelled:
		return true
	}
	return false
}

// ParseState returns the state named by s, or an error naming the valid ones.
func ParseState(s string) (State, error) {
	st := State(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown state %q (want one of %v)", s, States)
	}
	return st, nil
}

// CanTransition reports whether the table allows a direct move from one state to another.
func CanTransition(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// CanReach reports whether to can be reached from from through one or more
// allowed moves. The core uses it when it mirrors an agent: between two passes
// the agent may have moved an action through several states (NEW → RUNNING →
// DONE), and the core sees only the last one.
func CanReach(from, to State) bool {
	seen := map[State]bool{from: true}
	next := []State{from}
	for len(next) > 0 {
		s := next[0]
		next = next[1:]
		for _, t := range transitions[s] {
			if t == to {
				return true
			}
			if !seen[t] {
				seen[t] = true
				next = append(next, t)
			}
		}
	}
	return false
}

// ErrTransition is returned (wrapped) when a move is not in the table.
var ErrTransition = fmt.Errorf("transition not allowed")

// CheckTransition returns nil when the move is allowed, and a wrapped ErrTransition otherwise.
func CheckTransition(from, to State) error {
	if CanTransition(from, to) {
		return nil
	}
	return fmt.Errorf("%w: %s → %s", ErrTransition, from, to)
}
