package config

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestErrorsErrIsNilWhenEmpty(t *testing.T) {
	t.Parallel()
	var es Errors
	if err := es.Err(); err != nil {
		t.Fatalf("empty list: %v", err)
	}
}

func TestErrorsSortedByFieldOneLineEach(t *testing.T) {
	t.Parallel()
	var es Errors
	es.Add("node_id", "required")
	es.Add("api.addr", "%q is not host:port", "x")
	es = append(es, Log{Level: "loud", Format: "text"}.Validate()...)
	err := fmt.Errorf("agent: %w", es.Err())
	if got, want := FieldsOf(err), []string{"api.addr", "log.level", "node_id"}; !slices.Equal(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
	want := "agent: invalid configuration:\n  api.addr: \"x\" is not host:port\n  log.level: \"loud\" is not debug, info, warn or error\n  node_id: required"
	if err.Error() != want {
		t.Fatalf("report %q, want %q", err, want)
	}
	var fe FieldError
	if !errors.As(err, &fe) || fe.Field != "api.addr" {
		t.Fatalf("errors.As found %+v", fe)
	}
	if es[0].Field != "node_id" {
		t.Fatal("Err reordered the list it was called on")
	}
}

func TestFieldsOfOtherErrors(t *testing.T) {
	t.Parallel()
	if got := FieldsOf(errors.New("disk full")); got != nil {
		t.Fatalf("fields %q of a plain error", got)
	}
}
