package ui

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/musterhq/muster/core/runs/playbook"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/textsafe"
)

// Every form and query decoder of the UI is fuzzed here; the seeds run in
// plain go test.

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/ui/approvals":                       "/ui/approvals",
		"/ui/events?type=action.*":            "/ui/events?type=action.*",
		"/ui/actions/x/../../health":          "/ui/health",
		"/ui/../api/v1/tokens":                "",
		"/ui/./actions/":                      "/ui/actions/",
		"//evil.example/ui/":                  "",
		"/\\evil.example":                     "",
		"/ui\\..\\":                           "",
		"https://evil.example/ui/":            "",
		"javascript:alert(1)":                 "",
		"/ui/\r\nSet-Cookie: x=y":             "",
		"/api/v1/actions":                     "",
		"":                                    "",
		"/ui/" + strings.Repeat("a", maxNext): "",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/ui/approvals", "/ui/events?type=action.*", "//evil", "/ui/../x", "/ui/%2e%2e/x",
		"/ui//evil.example", "/ui/\\\\evil", "http://x/ui/", "/ui/a?b=c#d", "/ui/a/./b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := safeNext(in)
		if out == "" {
			return
		}
		u, err := url.Parse(out)
		if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/ui/") ||
			strings.HasPrefix(out, "//") || strings.Contains(out, "\\") || hasControl(out) {
			t.Fatalf("safeNext(%q) = %q, which leaves the UI", in, out)
		}
		if strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/..") {
			t.Fatalf("safeNext(%q) = %q keeps a parent step", in, out)
		}
		if again := safeNext(out); again != out {
			t.Fatalf("safeNext is not stable: %q -> %q -> %q", in, out, again)
		}
	})
}

func FuzzDecodeLogin(f *testing.F) {
	for _, s := range []string{"token=mst_abc&csrf=x&next=%2Fui%2Fevents", "token=", "token=%00", "next=//evil&token=a",
		"token=" + strings.Repeat("a", 300), "token=%20mst_x%20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		got, err := decodeLogin(v)
		if err != nil {
			return
		}
		if got.Token == "" || len(got.Token) > maxTokenField || hasControl(got.Token) || got.Token != strings.TrimSpace(got.Token) {
			t.Fatalf("decodeLogin(%q) accepted token %q", body, got.Token)
		}
		if got.Next != "" && safeNext(got.Next) != got.Next {
			t.Fatalf("decodeLogin(%q) accepted next %q", body, got.Next)
		}
	})
}

func FuzzDecodeDecision(f *testing.F) {
	for _, s := range []string{"reason=ok&csrf=x", "reason=", "reason=%1b%5b31m", "next=%2Fui%2Factions%2Fx&reason=r",
		"reason=" + strings.Repeat("b", 600), "reason=%e2%80%ae"} {
		for _, d := range []uint8{0, 1, 2} {
			f.Add(s, d)
		}
	}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		d := []decision{decisionApprove, decisionReject, decisionUrgent}[which%3]
		reject := d != decisionApprove // a rejection and an urgent mark need a reason
		got, err := decodeDecision(d, v)
		if err != nil {
			return
		}
		if len(got.Reason) > maxReason || hasControl(got.Reason) || !utf8.ValidString(got.Reason) {
			t.Fatalf("decodeDecision(%q) accepted reason %q", body, got.Reason)
		}
		if reject && got.Reason == "" {
			t.Fatalf("a rejection without a reason was accepted: %q", body)
		}
		if got.Next != "" && safeNext(got.Next) != got.Next {
			t.Fatalf("decodeDecision(%q) accepted next %q", body, got.Next)
		}
	})
}

func FuzzDecodeActionFilter(f *testing.F) {
	for _, s := range []string{"cluster=prod&node=db-1&state=running&kind=muster.io%2Fdebug.ping", "state=BOGUS",
		"marker=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", "marker=x", "node=%00", "kind=" + strings.Repeat("k", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		got, err := decodeActionFilter(v)
		if err != nil {
			return
		}
		for _, s := range []string{got.Cluster, got.Node, got.Kind} {
			if len(s) > maxFilter || hasControl(s) {
				t.Fatalf("decodeActionFilter(%q) accepted %q", query, s)
			}
		}
		if got.State != "" && !got.State.Valid() {
			t.Fatalf("decodeActionFilter(%q) accepted state %q", query, got.State)
		}
		if got.Marker != "" && !action.ValidID(got.Marker) {
			t.Fatalf("decodeActionFilter(%q) accepted marker %q", query, got.Marker)
		}
		// Its query string decodes to the same filter.
		again, err := decodeActionFilter(got.values())
		if err != nil || again.Cluster != got.Cluster || again.Node != got.Node || again.Kind != got.Kind || again.State != got.State {
			t.Fatalf("filter %+v does not survive its own query string: %+v %v", got, again, err)
		}
	})
}

func FuzzDecodeEventFilter(f *testing.F) {
	for _, s := range []string{"type=action.*&cluster=prod", "type=node.up&node=db-1", "type=bogus",
		"action=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", "action=short", "cluster=%07",
		"type=action.*,run.*", "type=run.paused,bogus", "type=,", "run=*", "run=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", "run=**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		got, err := decodeEventFilter(v)
		if err != nil {
			return
		}
		if got.Type != "" {
			for _, one := range strings.Split(got.Type, ",") {
				if !slices.Contains(eventTypes, one) {
					t.Fatalf("decodeEventFilter(%q) accepted type %q", query, got.Type)
				}
			}
		}
		if got.Run != "" && got.Run != "*" && !action.ValidID(got.Run) {
			t.Fatalf("decodeEventFilter(%q) accepted run %q", query, got.Run)
		}
		if got.Action != "" && !action.ValidID(got.Action) {
			t.Fatalf("decodeEventFilter(%q) accepted action %q", query, got.Action)
		}
		for _, s := range []string{got.Cluster, got.Node} {
			if len(s) > maxFilter || hasControl(s) {
				t.Fatalf("decodeEventFilter(%q) accepted %q", query, s)
			}
		}
	})
}

func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[31mred\x1b[0m", "a\tb\nc", "\u202eevil", "\xff\xfe", "bell\x07", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := printable(in)
		if !utf8.ValidString(out) {
			t.Fatalf("printable(%q) = %q is not UTF-8", in, out)
		}
		for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\t' }) {
			if textsafe.Escape(line) != line {
				t.Fatalf("printable(%q) = %q keeps something a terminal or a page could act on", in, out)
			}
		}
		if strings.Count(out, "\n") != strings.Count(in, "\n") {
			t.Fatalf("printable(%q) = %q changes the lines", in, out)
		}
	})
}

func FuzzDecodeDrain(f *testing.F) {
	for _, s := range []string{"reason=kernel+update&csrf=x", "reason=", "reason=%1b%5b31m", "reason=%e2%80%ae",
		"reason=" + strings.Repeat("c", 600), "reason=%20spaced%20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		got, err := decodeDrain(v)
		if err != nil {
			return
		}
		if len(got.Reason) > maxReason || hasControl(got.Reason) || got.Reason != strings.TrimSpace(got.Reason) {
			t.Fatalf("decodeDrain(%q) accepted reason %q", body, got.Reason)
		}
	})
}

func FuzzDecodeStart(f *testing.F) {
	pb, err := playbook.Parse([]byte(sleepPlaybook))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"cluster=prod&version=1&digest=abc&p.node=db-1", "cluster=&version=1&digest=x",
		"cluster=prod&version=-1&digest=x", "cluster=prod&version=1&digest=x&p.bogus=1", "cluster=prod&version=1&digest=x&p.note=%1b",
		"cluster=prod&version=1&digest=x&p.seconds=" + strings.Repeat("9", 2000), "plan=1&p.loud=true",
		"cluster=prod&version=1&digest=x&limit=db-*,web-1&not_before=2026-12-24T02:00", "cluster=prod&version=1&digest=x&limit=a,,b",
		"cluster=prod&version=1&digest=x&not_before=2026-12-24T02:00:00Z", "cluster=prod&version=1&digest=x&not_before=tomorrow",
		"cluster=prod&version=1&digest=x&limit=%1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		got, err := decodeStart(v, pb)
		if err != nil {
			return
		}
		if got.Cluster == "" || got.Version < 1 || got.Digest == "" || hasControl(got.Cluster) || hasControl(got.Digest) {
			t.Fatalf("decodeStart(%q) accepted %+v", body, got)
		}
		for k, val := range got.Params {
			if k != "seconds" && k != "node" && k != "note" && k != "loud" || len(val) > maxParamField || hasControl(val) {
				t.Fatalf("decodeStart(%q) accepted parameter %q=%q", body, k, val)
			}
		}
		for _, p := range got.When.limit {
			if p == "" || strings.TrimSpace(p) != p || hasControl(p) {
				t.Fatalf("decodeStart(%q) accepted the limit pattern %q", body, p)
			}
		}
	})
}
