package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FieldError is one bad configuration field: its key, as people write it in
// the YAML file ("actions.retention", "clusters[0].nodes[1].id"), and what is
// wrong with it.
type FieldError struct {
	Field   string
	Problem string
	// Err is the error behind Problem, when there is one (errors.Is and
	// errors.As reach it).
	Err error
}

func (e FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap returns Err.
func (e FieldError) Unwrap() error { return e.Err }

// Problem returns the FieldError of field, its problem formatted.
func Problem(field, format string, args ...any) FieldError {
	return FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Wrap returns the FieldError of field for err.
func Wrap(field string, err error) FieldError {
	return FieldError{Field: field, Problem: err.Error(), Err: err}
}

// Errors is every bad field of a configuration: validation reports them all
// at once rather than the first one.
type Errors []FieldError

// Add appends the problem of field.
func (es *Errors) Add(field, format string, args ...any) {
	*es = append(*es, Problem(field, format, args...))
}

// Err returns nil when there is no error, or else the errors ordered by field
// (then problem), so that the report is stable.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	sorted := slices.Clone(es)
	slices.SortStableFunc(sorted, func(a, b FieldError) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Problem, b.Problem))
	})
	return sorted
}

// Error prints a header and one line per field.
func (es Errors) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap gives errors.As and errors.Is each FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Fields returns the fields with a problem, in order, once each.
func (es Errors) Fields() []string {
	var out []string
	for _, e := range es {
		if !slices.Contains(out, e.Field) {
			out = append(out, e.Field)
		}
	}
	return out
}

// FieldsOf returns the fields err names when it is (or wraps) Errors, and
// nil otherwise.
func FieldsOf(err error) []string {
	var es Errors
	if errors.As(err, &es) {
		return es.Fields()
	}
	return nil
}
