package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/musterhq/muster/shared/action"
)

// Limits on the body of an answer, so that a peer (an agent, a gossip
// member posing as one, or a core) cannot make the reader hold more than
// this in memory. A call's limit is one of these, or RecordLimit per record
// for a page.
const (
	// DefaultLimit bounds an answer no other limit names (lists of
	// clusters, nodes, tokens, events).
	DefaultLimit = 16 << 20
	// InfoLimit bounds an agent's info and the health answers.
	InfoLimit = 256 << 10
	// ChangeCounterLimit bounds the answer of GET /api/v1/changes.
	ChangeCounterLimit = 4 << 10
	// RecordLimit bounds one action record: its output and args (64 KiB
	// each, action.MaxOutput and action.MaxArgs) with room for JSON
	// escapes, progress and the other fields.
	RecordLimit = action.MaxOutput + action.MaxArgs + 32<<10
	// OneRecordLimit bounds an answer that is one record, with its history.
	OneRecordLimit = 4 << 20
	// pageSlack is added to a page's limit for its envelope.
	pageSlack = 64 << 10
)

// pageLimit is the limit of a page of n records (n <= 0: maxRecords).
func pageLimit(n, maxRecords int) int64 {
	if n <= 0 || n > maxRecords {
		n = maxRecords
	}
	return int64(n)*RecordLimit + pageSlack
}

// ErrTooLarge: an answer's body is larger than the limit of its call. The
// error is a *TooLargeError.
var ErrTooLarge = errors.New("answer too large")

// TooLargeError says which answer passed which limit. It matches
// ErrTooLarge.
type TooLargeError struct {
	Method, URL string
	Limit       int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s %s: the answer is larger than the %s limit; nothing past it was read", e.Method, e.URL, size(e.Limit))
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// capped is an answer to decode with its own limit (see do).
type capped struct {
	v any
	n int64
}

// limit unwraps out: the value to decode into and its limit.
func limit(out any) (any, int64) {
	if c, ok := out.(capped); ok {
		return c.v, c.n
	}
	return out, DefaultLimit
}

// readJSON decodes the body of resp into out, reading at most n bytes of
// it: a body that is, or says it is, longer is a *TooLargeError.
func readJSON(resp *http.Response, n int64, out any) error {
	tooLarge := &TooLargeError{Method: resp.Request.Method, URL: resp.Request.URL.Redacted(), Limit: n}
	if resp.ContentLength > n {
		return tooLarge
	}
	lr := &io.LimitedReader{R: resp.Body, N: n + 1}
	err := json.NewDecoder(lr).Decode(out)
	if lr.N <= 0 {
		return tooLarge
	}
	if err != nil {
		return fmt.Errorf("decode %s %s answer: %w", tooLarge.Method, tooLarge.URL, err)
	}
	return nil
}

// discard reads and drops the body of resp (so that its connection can be
// reused), up to n bytes: a longer body is a *TooLargeError.
func discard(resp *http.Response, n int64) error {
	if resp.ContentLength > n {
		return &TooLargeError{Method: resp.Request.Method, URL: resp.Request.URL.Redacted(), Limit: n}
	}
	if read, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, n+1)); read > n {
		return &TooLargeError{Method: resp.Request.Method, URL: resp.Request.URL.Redacted(), Limit: n}
	}
	return nil
}
