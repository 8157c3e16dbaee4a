package sso

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeClaims(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("g", MaxGroupLen+1)
	tests := []struct {
		name, raw string
		want      Identity
		bad       bool
	}{
		{name: "name and groups", raw: `{"email":"dana@example.com","email_verified":true,"groups":["db-oncall","sre","sre"]}`,
			want: Identity{Name: "dana@example.com", Groups: []string{"db-oncall", "sre"}}},
		{name: "no groups claim", raw: `{"email":"dana","email_verified":true}`, want: Identity{Name: "dana"}},
		{name: "null groups", raw: `{"email":"dana","email_verified":true,"groups":null}`, want: Identity{Name: "dana"}},
		{name: "markup kept as text", raw: `{"email":"<b>x</b>","email_verified":true,"groups":["<script>"]}`,
			want: Identity{Name: "<b>x</b>", Groups: []string{"<script>"}}},
		{name: "no name", raw: `{"groups":["a"]}`, bad: true},
		{name: "address not verified", raw: `{"email":"alice@corp.example","email_verified":false}`, bad: true},
		{name: "address without email_verified", raw: `{"email":"alice@corp.example"}`, bad: true},
		{name: "email_verified not a boolean", raw: `{"email":"alice@corp.example","email_verified":"true"}`, bad: true},
		{name: "empty name", raw: `{"email":""}`, bad: true},
		{name: "name not a string", raw: `{"email":42}`, bad: true},
		{name: "name with a newline", raw: `{"email":"a\nb"}`, bad: true},
		{name: "name with spaces around", raw: `{"email":" a"}`, bad: true},
		{name: "groups a string", raw: `{"email":"a","email_verified":true,"groups":"admins"}`, bad: true},
		{name: "groups of numbers", raw: `{"email":"a","email_verified":true,"groups":[1,2]}`, bad: true},
		{name: "groups an object", raw: `{"email":"a","email_verified":true,"groups":{"x":"y"}}`, bad: true},
		{name: "a null group", raw: `{"email":"a","email_verified":true,"groups":[null]}`, bad: true},
		{name: "an empty group", raw: `{"email":"a","email_verified":true,"groups":[""]}`, bad: true},
		{name: "a long group", raw: `{"email":"a","email_verified":true,"groups":["` + long + `"]}`, bad: true},
		{name: "too many groups", raw: `{"email":"a","email_verified":true,"groups":[` + strings.Repeat(`"g",`, MaxGroups) + `"h"]}`, bad: true},
		{name: "not an object", raw: `["email"]`, bad: true},
		{name: "null", raw: `null`, bad: true},
		{name: "trailing data", raw: `{"email":"a"} {}`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeClaims([]byte(tt.raw), "email", "groups")
			if tt.bad {
				if !errors.Is(err, ErrClaims) {
					t.Fatalf("DecodeClaims(%s) = %+v, %v; want ErrClaims", tt.raw, got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecodeClaims(%s) = %+v, %v; want %+v", tt.raw, got, err, tt.want)
			}
		})
	}
}

// FuzzDecodeClaims: whatever the provider signs, the decoder either refuses
// it with ErrClaims or returns a person within the bounds, printable, with
// distinct groups.
func FuzzDecodeClaims(f *testing.F) {
	for _, s := range []string{`{"email":"dana@example.com","email_verified":true,"groups":["db","sre"]}`, `{"email":"a","groups":"x"}`,
		`{"email":"a\u0000"}`, `{"email":"a","groups":[1]}`, `{}`, `null`, `{"email":"a","groups":[null,"b"]}`,
		`{"preferred_username":"x","email":"y"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, err := DecodeClaims(raw, "email", "groups")
		if err != nil {
			if !errors.Is(err, ErrClaims) {
				t.Fatalf("error %v is not ErrClaims", err)
			}
			return
		}
		if checkText(id.Name, MaxNameLen) != nil || len(id.Groups) > MaxGroups {
			t.Fatalf("accepted %+v", id)
		}
		seen := map[string]bool{}
		for _, g := range id.Groups {
			if checkText(g, MaxGroupLen) != nil || seen[g] {
				t.Fatalf("accepted group %q of %+v", g, id)
			}
			seen[g] = true
		}
	})
}
