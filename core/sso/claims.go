package sso

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the claims a person is taken from.
const (
	// MaxNameLen bounds the person's name (the username claim).
	MaxNameLen = 256
	// MaxGroups bounds the groups one ID token may list.
	MaxGroups = 256
	// MaxGroupLen bounds each group's name.
	MaxGroupLen = 256
)

// ErrClaims is an ID token whose claims do not name a person as the
// configuration says.
var ErrClaims = errors.New("identity claims refused")

// Identity is the person an ID token names.
type Identity struct {
	Name   string
	Groups []string
}

// DecodeClaims takes the person from the JSON object of an ID token's
// claims: their name is the string claim usernameClaim, their groups the
// claim groupsClaim, a list of strings (absent or null: none). Anything else
// is refused: a name that is not a non-empty string of printable characters,
// groups that are not a list of such strings, or either beyond its bounds.
// Duplicate groups are listed once.
func DecodeClaims(raw []byte, usernameClaim, groupsClaim string) (Identity, error) {
	var claims map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return Identity{}, fmt.Errorf("%w: the claims are not a JSON object", ErrClaims)
	}
	if dec.More() {
		return Identity{}, fmt.Errorf("%w: trailing data after the claims", ErrClaims)
	}
	var id Identity
	v, ok := claims[usernameClaim]
	if !ok {
		return Identity{}, fmt.Errorf("%w: no %q claim", ErrClaims, usernameClaim)
	}
	if err := json.Unmarshal(v, &id.Name); err != nil {
		return Identity{}, fmt.Errorf("%w: claim %q is not a string", ErrClaims, usernameClaim)
	}
	if err := checkText(id.Name, MaxNameLen); err != nil {
		return Identity{}, fmt.Errorf("%w: claim %q %v", ErrClaims, usernameClaim, err)
	}
	// An address the provider has not verified is whatever its user
	// typed: it names nobody (OpenID Connect Core, 5.1: email_verified).
	if usernameClaim == "email" {
		var verified bool
		if json.Unmarshal(claims["email_verified"], &verified) != nil || !verified {
			return Identity{}, fmt.Errorf("%w: the provider has not verified the address in claim %q (email_verified)", ErrClaims, usernameClaim)
		}
	}
	g, ok := claims[groupsClaim]
	if !ok || string(g) == "null" {
		return id, nil
	}
	var groups []string
	if err := json.Unmarshal(g, &groups); err != nil {
		return Identity{}, fmt.Errorf("%w: claim %q is not a list of strings", ErrClaims, groupsClaim)
	}
	if len(groups) > MaxGroups {
		return Identity{}, fmt.Errorf("%w: claim %q lists more than %d groups", ErrClaims, groupsClaim, MaxGroups)
	}
	seen := map[string]bool{}
	for _, grp := range groups {
		if err := checkText(grp, MaxGroupLen); err != nil {
			return Identity{}, fmt.Errorf("%w: a group of claim %q %v", ErrClaims, groupsClaim, err)
		}
		if !seen[grp] {
			seen[grp] = true
			id.Groups = append(id.Groups, grp)
		}
	}
	return id, nil
}

// checkText refuses an empty, overlong, non-UTF-8 string, or one with
// control characters or surrounding spaces.
func checkText(s string, max int) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > max:
		return fmt.Errorf("is longer than %d bytes", max)
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8")
	case strings.TrimSpace(s) != s:
		return errors.New("has surrounding spaces")
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) >= 0:
		return errors.New("has control characters")
	}
	return nil
}
