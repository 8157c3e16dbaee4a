// Package names holds the rules for the names muster accepts: the ids of
// clusters and nodes, the names of API tokens, and the names of a run's
// stages and steps. The core's configuration,
// its gossip view, its API, the agent's configuration and the TLS identities
// all check through here, so a name one part accepts every other part
// accepts too.
package names

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a name that breaks its rule.
var ErrInvalid = errors.New("invalid name")

// Longest names.
const (
	MaxID    = 128
	MaxToken = 64
	MaxStep  = 64
)

// CheckID checks the id of a cluster or a node: 1 to 128 letters, digits,
// '.', '_' or '-', starting with a letter or a digit (so that an id is never
// "." or ".." in a URL path, nor read as a flag).
func CheckID(id string) error {
	if !valid(id, MaxID, false) {
		return fmt.Errorf("%w: %q: an id is 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, id, MaxID)
	}
	return nil
}

// CheckToken checks the name of an API token: 1 to 64 letters, digits, '.',
// '_', '@' or '-', starting with a letter or a digit. It becomes the
// requester and approver of actions, so it is printable and short.
func CheckToken(name string) error {
	if !valid(name, MaxToken, true) {
		return fmt.Errorf("%w: %q: a token name is 1 to %d letters, digits, '.', '_', '@' or '-', starting with a letter or digit", ErrInvalid, name, MaxToken)
	}
	return nil
}

// CheckStep checks the name of a run's stage or step: 1 to 64 letters,
// digits, '-', '_' or '.'. The core checks a run's stages and steps with
// it, and the agent the place in a run a push gives an action, so the
// agent accepts every name the core does and no longer one.
func CheckStep(name string) error {
	if name == "" || len(name) > MaxStep {
		return stepErr(name)
	}
	for _, r := range name {
		if !alnum(r) && r != '.' && r != '_' && r != '-' {
			return stepErr(name)
		}
	}
	return nil
}

func stepErr(name string) error {
	return fmt.Errorf("%w: %.100q: a stage or step name is 1 to %d letters, digits, '-', '_' or '.'", ErrInvalid, name, MaxStep)
}

func valid(s string, maxLen int, at bool) bool {
	if s == "" || len(s) > maxLen || !alnum(rune(s[0])) {
		return false
	}
	for _, r := range s {
		if !alnum(r) && r != '.' && r != '_' && r != '-' && !(at && r == '@') {
			return false
		}
	}
	return true
}

func alnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
