package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// answer serves every request with status and the error envelope holding
// msg and, when set, rec.
func answer(t *testing.T, status int, msg string, rec *action.Action) *Agent {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: "x", Message: msg, Record: rec}})
	}))
	t.Cleanup(ts.Close)
	return NewAgent(ts.URL, ts.Client())
}

// Callers decide on the sentinel of an answer, never on its status.
func TestAnswersMatchTheirSentinels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		status int
		want   error
		not    []error
	}{
		{400, ErrBadRequest, []error{ErrNotFound}},
		{401, ErrUnauthorized, nil},
		{403, ErrForbidden, nil},
		{404, ErrNotFound, []error{ErrGone}},
		{410, ErrGone, []error{ErrNotFound}},
		{413, ErrRequestTooLarge, []error{ErrTooLarge}},
		{422, ErrRefused, nil},
		{429, ErrTooMany, nil},
		{503, ErrUnavailable, []error{ErrServer}},
		{502, ErrServer, []error{ErrUnavailable}},
		{418, ErrUnexpected, []error{ErrServer}},
	} {
		_, err := answer(t, c.status, "why", nil).Get(ctx, "id")
		if !errors.Is(err, c.want) || !Answered(err) || MessageOf(err) != "why" {
			t.Errorf("%d: %v does not match %v with the message", c.status, err, c.want)
		}
		for _, n := range c.not {
			if errors.Is(err, n) {
				t.Errorf("%d: %v matches %v too", c.status, err, n)
			}
		}
	}
}

func TestPushAndCancelAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	theirs := &action.Action{ID: "id", Kind: "a/b", State: action.Running}
	a, status, err := answer(t, http.StatusConflict, "other content", theirs).Push(ctx, &wire.PushRequest{ID: "id"})
	if err != nil || status != http.StatusConflict || a.Kind != "a/b" {
		t.Fatalf("push answered 409: %v %d %v, want the agent's record", a, status, err)
	}
	_, _, err = answer(t, http.StatusUnprocessableEntity, "unknown kind a/c", nil).Push(ctx, &wire.PushRequest{ID: "id"})
	if !errors.Is(err, ErrRefused) || MessageOf(err) != "unknown kind a/c" {
		t.Fatalf("push answered 422: %v", err)
	}
	_, err = answer(t, http.StatusConflict, "already DONE", theirs).Cancel(ctx, "id")
	var ae *APIError
	if !errors.Is(err, ErrFinal) || !errors.Is(err, ErrConflict) || !errors.As(err, &ae) || ae.Record() == nil {
		t.Fatalf("cancel answered 409: %v, want ErrFinal with the record", err)
	}
	if _, err = answer(t, http.StatusConflict, "other", nil).Get(ctx, "id"); errors.Is(err, ErrFinal) {
		t.Fatal("a 409 to another call matches ErrFinal")
	}
	_, err = NewAgent("127.0.0.1:1", nil).Cancel(ctx, "id")
	if err == nil || Answered(err) || errors.Is(err, ErrFinal) || errors.Is(err, ErrNotFound) {
		t.Fatalf("no answer: %v", err)
	}
}

// FuzzDecodeError reads arbitrary error answers: always an *APIError with
// the status, and a message, never a panic.
func FuzzDecodeError(f *testing.F) {
	for _, s := range []string{`{"error":{"code":"conflict","message":"x","state":"DONE"}}`, `{"error":null}`,
		`not json`, ``, `{"error":{"record":{"id":1}}}`, `{"error":{"message":"\u001b[31m"}}`} {
		f.Add(409, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		err := decodeError(&http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader(body))})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status {
			t.Fatalf("decodeError = %v", err)
		}
		if ae.Detail.Message == "" && http.StatusText(status) != "" {
			t.Fatal("an error answer without a message")
		}
	})
}
