package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// FuzzChangeCounter: whatever an agent answers to GET /api/v1/changes,
// ChangeCounter returns an error or a counter whose epoch is bounded and
// not empty.
func FuzzChangeCounter(f *testing.F) {
	for _, s := range []string{`{"epoch":"e","counter":3}`, `{"epoch":"","counter":1}`, `{"counter":-1}`,
		`{"epoch":"x","counter":18446744073709551615}`, `[]`, `{"epoch":1}`, `{"epoch":"e","counter":1,"x":2}`} {
		f.Add([]byte(s))
	}
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer ts.Close()
	ag := NewAgent(ts.URL, ts.Client())
	f.Fuzz(func(t *testing.T, b []byte) {
		body = b
		c, err := ag.ChangeCounter(context.Background())
		if err != nil {
			return
		}
		if c.Epoch == "" || len(c.Epoch) > wire.MaxInfoString {
			t.Fatalf("kept an epoch of %d bytes from %q", len(c.Epoch), b)
		}
	})
}
