package notify

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// cloudEventsSchema compiles testdata/cloudevents-1.0.schema.json with
// formats asserted (date-time, uri-reference).
func cloudEventsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/cloudevents-1.0.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("cloudevents.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("cloudevents.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue 38: a destination of format cloudevents gets each event in the
// CloudEvents 1.0 JSON envelope (structured mode), valid against the
// format's schema, signed as json deliveries are; id, source, type, time and
// subject are the event's own, the same at a try made again.
func TestCloudEventsDeliveryIsAValidSignedEnvelope(t *testing.T) {
	t.Parallel()
	schema := cloudEventsSchema(t)
	var (
		mu     sync.Mutex
		bodies [][]byte
		types  []string
		fail   = 1 // the first try fails: the second must be the same event
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, _ := standardwebhooks.NewWebhookRaw([]byte("s3cret"))
		if err := wh.Verify(body, r.Header); err != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, body)
		types = append(types, r.Header.Get("Content-Type"))
		if fail > 0 {
			fail--
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	s := setup(t, []Destination{{Name: "siem", URL: srv.URL, Format: FormatCloudEvents, SecretFile: writeSecret(t, "s3cret", 0o600)}})
	// Now, with nanoseconds the store rounds to microseconds: a fixed past
	// date would age past GiveUpAfter and its retry would be given up.
	ts := time.Now().UTC().Truncate(time.Second).Add(123456789)
	wantTime := ts.Round(time.Microsecond).Format(time.RFC3339Nano)
	events := []*store.Event{
		{Type: store.EventActionCreated, Actor: "alice", ClusterID: "prod", NodeID: "db-1", ActionID: "3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", Message: "created", TS: ts},
		{Type: store.EventRunFinished, Actor: "core", ClusterID: "prod", RunID: "5d1e3c9a-0b7f-4c2e-8a61-9e2f4b7d3c10", Message: "done", TS: ts},
		{Type: store.EventNodeDown, Actor: "core", ClusterID: "prod west", NodeID: "db-2", Message: "down", TS: ts},
		{Type: store.EventTokenCreated, Actor: "admin", Message: "token", TS: ts, Data: map[string]any{"name": "x"}},
	}
	for _, e := range events {
		if err := s.st.Update(t.Context(), func(tx store.Tx) error { return tx.AppendEvent(t.Context(), e) }); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "every event delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) >= len(events)+1 })
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(bodies[0], bodies[1]) {
		t.Errorf("the try made again differs:\n%s\n%s", bodies[0], bodies[1])
	}
	wantSubject := []string{"actions/3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", "runs/5d1e3c9a-0b7f-4c2e-8a61-9e2f4b7d3c10", "nodes/db-2", ""}
	wantSource := []string{"/muster/clusters/prod", "/muster/clusters/prod", "/muster/clusters/prod%20west", "/muster"}
	for i, body := range bodies[1:] {
		if types[i+1] != "application/cloudevents+json" {
			t.Errorf("delivery %d: Content-Type %q", i, types[i+1])
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("delivery %d is not a valid CloudEvent: %v\n%s", i, err, body)
		}
		var ce wire.CloudEvent
		if err := json.Unmarshal(body, &ce); err != nil {
			t.Fatal(err)
		}
		e := events[i]
		if ce.ID != strconv.FormatInt(e.Seq, 10) || ce.Type != "io.muster."+e.Type || ce.Source != wantSource[i] ||
			ce.Subject != wantSubject[i] || ce.Time != wantTime || !strings.HasSuffix(wantTime, ".123457Z") || ce.Data.Seq != e.Seq ||
			ce.Data.Message != e.Message || ce.MusterSeq != e.Seq {
			t.Errorf("delivery %d: %s", i, body)
		}
	}
	// The schema is no rubber stamp: it refuses what the format forbids.
	for name, bad := range map[string]string{
		"no id":             `{"specversion":"1.0","source":"/x","type":"t"}`,
		"version 0.3":       `{"specversion":"0.3","id":"1","source":"/x","type":"t"}`,
		"time not RFC 3339": `{"specversion":"1.0","id":"1","source":"/x","type":"t","time":"yesterday"}`,
		"upper-case ext":    `{"specversion":"1.0","id":"1","source":"/x","type":"t","Seq":1}`,
	} {
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(bad)))
		if schema.Validate(inst) == nil {
			t.Errorf("%s: the schema takes %s", name, bad)
		}
	}
}
