package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// hugeServer answers every request with a body of up to total bytes that
// never ends its JSON (open is written first, then filler), and counts what
// it managed to write before the client hung up.
func hugeServer(t *testing.T, open string, total int64, chunked bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var written atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		if !chunked {
			w.Header().Set("Content-Length", "419430400")
		}
		n, _ := w.Write([]byte(open))
		written.Add(int64(n))
		chunk := []byte(strings.Repeat("a", 32<<10))
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(ts.Close)
	return ts, &written
}

// Every answer read by the clients has a limit (issue 9, item 2): a 400 MiB
// info, page, record or event ends in ErrTooLarge after at most the limit
// and what the network buffers, not the whole body.
func TestClientBodyLimit(t *testing.T) {
	t.Parallel()
	const total = 400 << 20
	for _, tc := range []struct {
		name    string
		open    string
		chunked bool
		call    func(base string) error
		limit   int64
	}{
		{"agent info", `{"node_id":"n","kinds":["`, true, func(base string) error {
			_, err := NewAgent(base, nil).Info(context.Background())
			return err
		}, InfoLimit},
		{"agent info with a Content-Length", `{"kinds":["`, false, func(base string) error {
			_, err := NewAgent(base, nil).Info(context.Background())
			return err
		}, InfoLimit},
		{"agent page", `{"actions":[{"output":"`, true, func(base string) error {
			_, err := NewAgent(base, nil).Changes(context.Background(), 0, 10, false)
			return err
		}, pageLimit(10, maxAgentPage)},
		{"agent health", ``, true, func(base string) error {
			return NewAgent(base, nil).Health(context.Background())
		}, InfoLimit},
		{"core action", `{"id":"`, true, func(base string) error {
			_, err := NewCore(base, "mst_x", nil).Action(context.Background(), "a1")
			return err
		}, OneRecordLimit},
		{"core clusters", `[{"id":"`, true, func(base string) error {
			_, err := NewCore(base, "mst_x", nil).Clusters(context.Background())
			return err
		}, DefaultLimit},
		{"core event stream", "data: {\"message\":\"", true, func(base string) error {
			s, err := NewCore(base, "mst_x", nil).Stream(context.Background(), -1, EventFilter{})
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.Next()
			return err
		}, EventLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, written := hugeServer(t, tc.open, total, tc.chunked)
			err := tc.call(ts.URL)
			var tl *TooLargeError
			if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tl) || tl.Limit != tc.limit {
				t.Fatalf("err = %v, want ErrTooLarge with the limit %d", err, tc.limit)
			}
			if !strings.Contains(err.Error(), size(tc.limit)) {
				t.Fatalf("the error %q does not say the limit", err)
			}
			ts.CloseClientConnections()
			// The server stops at the client's hang-up: what it wrote is the
			// limit plus socket buffers, far from the 400 MiB it offered.
			w := written.Load()
			if w > tc.limit+32<<20 {
				t.Fatalf("the server wrote %d bytes before the client stopped it (limit %d)", w, tc.limit)
			}
			t.Logf("limit %d bytes: the server wrote %d of the %d it offered", tc.limit, w, int64(total))
		})
	}
}

// An agent's info within the size limit but with too many or too long
// kinds is refused (issue 9, item 2).
func TestClientBodyLimitCapsInfoLists(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"too many kinds":     `{"node_id":"n","kinds":[` + strings.TrimSuffix(strings.Repeat(`"k",`, wire.MaxInfoKinds+1), ",") + `]}`,
		"a kind too long":    `{"node_id":"n","kinds":["` + strings.Repeat("k", 201) + `"]}`,
		"a node id too long": `{"node_id":"` + strings.Repeat("n", wire.MaxInfoString+1) + `"}`,
		"too many secrets":   `{"node_id":"n","secrets":[` + strings.TrimSuffix(strings.Repeat(`"s",`, 257), ",") + `]}`,
		"a secret not named": `{"node_id":"n","secrets":["../etc/shadow"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(ts.Close)
			info, err := NewAgent(ts.URL, nil).Info(context.Background())
			if !errors.Is(err, wire.ErrInfoOutOfBounds) || len(info.Kinds) != 0 || info.NodeID != "" {
				t.Fatalf("Info = %+v, %v; want ErrInfoOutOfBounds and nothing", info, err)
			}
		})
	}
}
