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
	"reflect"
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
// unknown fields, trailing data, a key given twice in one object and a key
// that names a field only when case is ignored are ErrInvalid: two readers
// of one body (a proxy, a log, this decoder) must not see two requests.
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
	kd := json.NewDecoder(bytes.NewReader(body))
	kd.UseNumber()
	if err := checkKeys(kd, reflect.TypeOf(out), ""); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// checkKeys walks the next JSON value of dec (already known to be valid)
// beside t, the type it decodes into (nil: free-form), refusing a key twice
// in an object and a key that matches a field of a struct only when case is
// ignored (encoding/json would take it for that field).
func checkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		t = nil // its own format: only duplicates are checked
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			structFields(t, fields)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key := kt.(string)
			if seen[key] {
				return fmt.Errorf("key %q appears twice in %s", key, where(path))
			}
			seen[key] = true
			var child reflect.Type
			switch {
			case fields != nil:
				ft, ok := fields[key]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return fmt.Errorf("key %q in %s: the field is %q (keys are case-sensitive)", key, where(path), name)
						}
					}
				}
				child = ft
			case t != nil && t.Kind() == reflect.Map:
				child = t.Elem()
			}
			if err := checkKeys(dec, child, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := checkKeys(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func where(path string) string {
	if path == "" {
		return "the body"
	}
	return strings.TrimPrefix(path, ".")
}

// structFields maps the JSON name of every exported field of the struct t
// to its type, with embedded structs' fields in line, as encoding/json
// names them.
func structFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && f.Tag.Get("json") == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, into)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := into[name]; !ok {
			into[name] = f.Type
		}
	}
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

// TextSize is about the size of a decoded JSON value (what json.Unmarshal
// into an any gives) as text: every key and string with its quotes, and the
// printed length of every other value. It bounds a value before work that
// grows with its size, without encoding it.
func TextSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 2
	case map[string]any:
		n := 2
		for k, e := range x {
			n += len(k) + 4 + TextSize(e)
		}
		return n
	case []any:
		n := 2
		for _, e := range x {
			n += 1 + TextSize(e)
		}
		return n
	}
	return len(fmt.Sprint(v))
}
