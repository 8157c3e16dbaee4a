// Package jsonbody reads request bodies strictly: one JSON object, no unknown
// fields, no trailing data, within a size limit, with errors worded for the
// person who sent it.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Errors, matched with errors.Is.
var (
	// ErrInvalid: the body is not acceptable JSON for the target.
	ErrInvalid = errors.New("invalid request body")
	// ErrTooLarge: the body is over the limit.
	ErrTooLarge = errors.New("request body too large")
)

// Read reads r up to limit bytes; more is ErrTooLarge.
func Read(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrInvalid, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// Decode decodes exactly one JSON object from body into out. An empty body,
// unknown fields and trailing data are ErrInvalid.
func Decode(body []byte, out any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: empty body, want a JSON object", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, Describe(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	return nil
}

// Describe rewrites a decoding error into a message for people.
func Describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want a JSON object, not %s", te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Sprintf("field %s may not be set by a caller", f)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return "malformed JSON: " + err.Error()
}
