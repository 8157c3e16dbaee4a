package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func TestNotifyListTestDeliveriesRedeliver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var res wire.NotifyTestResult
	e.call(http.MethodPost, "/api/v1/notify/hook/test", "admin", nil, http.StatusOK, &res)
	if !res.OK || res.Status != http.StatusNoContent {
		t.Errorf("test delivery = %+v, want ok 204", res)
	}
	var id int64
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.AppendEvent(ctx, &store.Event{Type: "notify.test.x", Actor: "t"}); err != nil {
			return err
		}
		d, err := store.NextDelivery(ctx, tx, "hook")
		if err != nil {
			return err
		}
		id = d.ID
		d.State, d.Attempts, d.LastStatus, d.LastError = store.DeliveryDead, 3, 404, "404 Not Found"
		return tx.UpdateDelivery(ctx, d)
	})
	var list wire.NotifyList
	_, body := e.do(http.MethodGet, "/api/v1/notify", "admin", nil)
	if strings.Contains(string(body), "TOPSECRET") {
		t.Errorf("list shows the URL's secret: %s", body)
	}
	e.call(http.MethodGet, "/api/v1/notify", "admin", nil, http.StatusOK, &list)
	if len(list.Destinations) != 1 || list.Destinations[0].Dead != 1 || list.Destinations[0].LastError != "404 Not Found" {
		t.Errorf("list = %+v", list)
	}
	var dead wire.NotifyDeliveries
	e.call(http.MethodGet, "/api/v1/notify/hook/deliveries?state=dead", "admin", nil, http.StatusOK, &dead)
	if len(dead.Deliveries) != 1 || dead.Deliveries[0].ID != id {
		t.Errorf("dead deliveries = %+v", dead)
	}
	var d wire.NotifyDelivery
	e.call(http.MethodPost, fmt.Sprintf("/api/v1/notify/deliveries/%d/redeliver", id), "admin", nil, http.StatusOK, &d)
	if d.State != store.DeliveryPending || d.Attempts != 0 {
		t.Errorf("redelivered = %+v, want pending with no tries", d)
	}
}

func TestNotifyBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/api/v1/notify/nope/test", http.StatusNotFound},
		{http.MethodGet, "/api/v1/notify/nope/deliveries", http.StatusNotFound},
		{http.MethodGet, "/api/v1/notify/hook/deliveries?state=lost", http.StatusBadRequest},
		{http.MethodGet, "/api/v1/notify/hook/deliveries?limit=0", http.StatusBadRequest},
		{http.MethodGet, "/api/v1/notify/hook/deliveries?before=x", http.StatusBadRequest},
		{http.MethodGet, "/api/v1/notify/hook/deliveries?stat=dead", http.StatusBadRequest},
		{http.MethodPost, "/api/v1/notify/deliveries/abc/redeliver", http.StatusBadRequest},
		{http.MethodPost, "/api/v1/notify/deliveries/999/redeliver", http.StatusNotFound},
	} {
		status, body := e.do(tc.method, tc.path, "admin", nil)
		if status != tc.want || !strings.Contains(string(body), `"error"`) {
			t.Errorf("%s %s = %d %s, want %d with the error envelope", tc.method, tc.path, status, body, tc.want)
		}
	}
}

// FuzzDeliveryQuery: whatever the query, the decoder answers a query within
// its bounds or a 400, and never panics.
func FuzzDeliveryQuery(f *testing.F) {
	for _, seed := range []string{"", "state=dead", "state=pending&limit=500&before=7", "state=lost", "limit=0",
		"limit=501", "limit=-1", "before=0", "before=x", "before=9223372036854775808", "limit=1e3", "state=%00", "a=b&state=dead&state=pending"} {
		f.Add(seed, "12")
	}
	f.Add("", "0")
	f.Add("", "-3")
	f.Add("", "ab")
	f.Fuzz(func(t *testing.T, raw, id string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := decodeDeliveryQuery("hook", v)
		if err != nil {
			if st, _ := classify(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		} else if q.Limit < 1 || q.Limit > maxDeliveryPage || q.Before < 0 || q.Destination != "hook" {
			t.Fatalf("query %+v out of bounds", q)
		}
		n, err := decodeDeliveryID(id)
		if err != nil {
			if st, _ := classify(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		} else if n < 1 {
			t.Fatalf("id %d accepted", n)
		}
	})
}
