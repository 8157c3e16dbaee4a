package ui

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
)

// FuzzDecodeNewAction: what the New action decoder accepts is what the
// API's create accepts (ops.CheckAction ran on it): a named cluster and
// node, a well-formed kind, args a JSON object of at most action.MaxArgs
// bytes, no control characters, a not-before not in the past.
func FuzzDecodeNewAction(f *testing.F) {
	for _, s := range []string{
		"cluster=prod&node=db-1&kind=muster.io%2Fdebug.sleep&args=%7B%22seconds%22%3A1%7D",
		"cluster=prod&node=db-1&kind=muster.io%2Fdebug.sleep",
		"cluster=prod&node=db-1&kind=sleep&args=%7B%7D",
		"cluster=&node=db-1&kind=a%2Fb",
		"cluster=prod&node=..%2Fx&kind=a%2Fb",
		"cluster=prod&node=db-1&kind=a%2Fb&args=%5B1%5D",
		"cluster=prod&node=db-1&kind=a%2Fb&args=null",
		"cluster=prod&node=db-1&kind=a%2Fb&args=%7B%22a%22%3A%22%1b%5B2J%22%7D",
		"cluster=prod&node=db-1&kind=a%2Fb&not_before=2001-01-01T00%3A00",
		"cluster=prod&node=db-1&kind=a%2Fb&not_before=2099-01-01T00%3A00",
		"cluster=prod&node=db-1&kind=a%2Fb&not_before=soon",
		"cluster=prod&node=db-1&kind=a%2Fb&timeout=-1",
		"cluster=prod&node=db-1&kind=a%2Fb&timeout=99999999999",
		"cluster=pr%1bod&node=db-1&kind=a%2Fb",
		"cluster=prod&node=db-1&kind=a%2Fb&args=" + strings.Repeat("%7B", 3000),
		"cluster=prod&target=role%3Ddb&kind=a%2Fb", "cluster=prod&target=all&kind=a%2Fb",
		"cluster=prod&target=role%3Ddb%2Czone%3Da&kind=a%2Fb&args=%7B%7D",
		"cluster=prod&node=db-1&target=role%3Ddb&kind=a%2Fb", "cluster=prod&target=nodes%3Ddb-1%2Cdb-2&kind=a%2Fb",
		"cluster=prod&target=%3D%3D&kind=a%2Fb", "cluster=prod&target=role%3D%1b&kind=a%2Fb",
		"cluster=prod&target=role%3Ddb&kind=a%2Fb&request_id=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11",
		"cluster=prod&target=role%3Ddb&kind=a%2Fb&request_id=a%20b", "cluster=prod&target=all&kind=a%2Fb&request_id=%1b%22",
		"cluster=prod&target=all&kind=a%2Fb&request_id=" + strings.Repeat("r", 129),
		"cluster=prod&node=db-1&kind=a%2Fb&request_id=x",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		form, req, tgt, errs := decodeNewAction(v, now)
		if hasControl(form.Target) {
			t.Fatalf("decodeNewAction(%q) keeps target %q to show", body, form.Target)
		}
		if ops.CheckRequestID(form.RequestID) != nil || req.RequestID != "" && (req.RequestID != form.RequestID || tgt == nil) {
			t.Fatalf("decodeNewAction(%q) keeps request_id %q (form %q)", body, req.RequestID, form.RequestID)
		}
		for field, msg := range errs {
			if msg == "" || hasControl(msg) && !strings.Contains(msg, "\\x") {
				t.Fatalf("decodeNewAction(%q): field %q has message %q", body, field, msg)
			}
		}
		if len(form.Args) > maxArgsField {
			t.Fatalf("decodeNewAction(%q) keeps %d bytes of args to show", body, len(form.Args))
		}
		if len(errs) > 0 {
			if tgt != nil {
				t.Fatalf("decodeNewAction(%q) refused with errors %v yet gave target %+v", body, errs, *tgt)
			}
			return
		}
		if tgt != nil {
			if req.NodeID != "" || target.Check(*tgt) != nil {
				t.Fatalf("decodeNewAction(%q) accepted node %q with target %+v", body, req.NodeID, *tgt)
			}
			req.NodeID = "target"
		}
		var obj map[string]json.RawMessage
		if names.CheckID(req.ClusterID) != nil || names.CheckID(req.NodeID) != nil || !action.ValidKind(req.Kind) ||
			len(req.Args) > action.MaxArgs || json.Unmarshal(req.Args, &obj) != nil || obj == nil ||
			req.TimeoutS < 0 || req.NotBefore != nil && req.NotBefore.Before(now) {
			t.Fatalf("decodeNewAction(%q) accepted %+v", body, req)
		}
	})
}

// FuzzDecodeNewSchedule: what the New schedule decoder accepts names a
// cluster, a playbook and a cron, has params without control characters
// or duplicate names, and a concurrency the schedule takes; every field
// shown again has no control characters.
func FuzzDecodeNewSchedule(f *testing.F) {
	for _, s := range []string{
		"name=nightly&cluster=prod&playbook=patch&cron=0+2+*+*+*&timezone=Europe%2FBerlin&concurrency=forbid",
		"name=n&cluster=prod&playbook=p&cron=%40every+6h&params=a%3D1%0Ab%3D2&version=3",
		"name=n&cluster=prod&playbook=p&cron=x&params=a%3D1%0Aa%3D2",
		"name=n&cluster=prod&playbook=p&cron=x&params=just+words",
		"name=n&cluster=prod&playbook=p&cron=x&params=a%3D%1b%5B2J",
		"name=n&cluster=prod&playbook=p&cron=x&version=-1",
		"name=n&cluster=prod&playbook=p&cron=x&concurrency=sometimes",
		"name=&cluster=&playbook=&cron=",
		"name=n%1b&cluster=prod&playbook=p&cron=x",
		"name=n&cluster=prod&playbook=p&cron=x&params=" + strings.Repeat("a%3Db%0A", 3000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		form, req, errs := decodeNewSchedule(v)
		for _, s := range []string{form.Name, form.Cluster, form.Playbook, form.Version, form.Cron, form.Timezone, form.Concurrency, form.CatchUp} {
			if hasControl(s) {
				t.Fatalf("decodeNewSchedule(%q) keeps %q to show", body, s)
			}
		}
		if len(form.Params) > maxParamsField {
			t.Fatalf("decodeNewSchedule(%q) keeps %d bytes of params", body, len(form.Params))
		}
		if len(errs) > 0 {
			return
		}
		if req.Name == "" || req.Cluster == "" || req.Playbook == "" || req.Cron == "" || req.Version < 0 ||
			req.Concurrency != "" && req.Concurrency != "forbid" && req.Concurrency != "allow" {
			t.Fatalf("decodeNewSchedule(%q) accepted %+v", body, req)
		}
		for k, val := range req.Params {
			if k == "" || hasControl(k) || hasControl(val) || strings.Contains(k, "=") {
				t.Fatalf("decodeNewSchedule(%q) accepted param %q=%q", body, k, val)
			}
		}
	})
}

// FuzzDecodeNewRun: what the New run decoder accepts names a cluster and
// has a document within bounds and params without control characters;
// every field shown again has no control characters but the document's
// and the params' newlines and tabs, and refused ones are within bounds.
func FuzzDecodeNewRun(f *testing.F) {
	for _, s := range []string{
		"cluster=prod&document=name%3A+a%0Astages%3A+%5B%5D&do=plan",
		"cluster=prod&document=x&params=a%3D1%0Ab%3D2&limit=web-*&not_before=2099-01-01T00%3A00",
		"cluster=prod&document=x&params=a%3D1%0Aa%3D2", "cluster=prod&document=x&limit=%2C%2C",
		"cluster=prod&document=x&not_before=soon", "cluster=&document=", "cluster=pr%1bod&document=x",
		"cluster=prod&document=%ff%fe", "cluster=prod&document=x&digest=" + strings.Repeat("a", 64),
		"cluster=prod&document=" + strings.Repeat("x", maxDocumentField+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		form, req, errs := decodeNewRun(v)
		for _, s := range []string{form.Cluster, form.Limit, form.NotBefore, form.Digest} {
			if hasControl(s) {
				t.Fatalf("decodeNewRun(%q) keeps %q to show", body, s)
			}
		}
		if len(form.Document) > maxDocumentField || len(form.Params) > maxParamsField {
			t.Fatalf("decodeNewRun(%q) keeps %d bytes of document, %d of params", body, len(form.Document), len(form.Params))
		}
		if len(errs) > 0 {
			return
		}
		if req.ClusterID == "" || req.Document == "" || len(req.Document) > maxDocumentField {
			t.Fatalf("decodeNewRun(%q) accepted %+v", body, req)
		}
		for k, val := range req.Params {
			if hasControl(k) || hasControl(val) {
				t.Fatalf("decodeNewRun(%q) accepted param %q=%q", body, k, val)
			}
		}
	})
}
