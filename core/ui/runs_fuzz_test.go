package ui

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
)

// The decoders of the Runs pages' forms and filters; the seeds run in plain
// go test.

func FuzzDecodeRunFilter(f *testing.F) {
	for _, s := range []string{"cluster=prod&state=RUNNING", "state=paused", "state=BOGUS", "state=%00",
		"marker=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11", "marker=short", "cluster=%07", "cluster=" + strings.Repeat("c", 201)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		got, err := decodeRunFilter(v)
		if err != nil {
			return
		}
		if got.State != "" && !slices.Contains(runStates, got.State) {
			t.Fatalf("decodeRunFilter(%q) accepted state %q", query, got.State)
		}
		if got.Marker != "" && !action.ValidID(got.Marker) {
			t.Fatalf("decodeRunFilter(%q) accepted marker %q", query, got.Marker)
		}
		if len(got.Cluster) > maxFilter || hasControl(got.Cluster) {
			t.Fatalf("decodeRunFilter(%q) accepted cluster %q", query, got.Cluster)
		}
		if again, err := decodeRunFilter(got.values()); err != nil || again.State != got.State || again.Cluster != got.Cluster {
			t.Fatalf("decodeRunFilter(%q): its values %v decode to %+v, %v", query, got.values(), again, err)
		}
	})
}

func FuzzDecodeRunChange(f *testing.F) {
	digest := strings.Repeat("ab", 32)
	for _, c := range []runChange{runApprove, runReject, runPause, runResume, runCancel, runPromote, runUrgent, runAbort, runRetry, "bogus"} {
		for _, s := range []string{"digest=" + digest, "digest=" + strings.ToUpper(digest), "digest=short", "reason=not+now",
			"reason=", "reason=%1b[31m", "reason=" + strings.Repeat("r", 501), "confirm=yes&reason=done", "confirm=no",
			"next=%2Fui%2Fapprovals", "next=//evil", "confirm=yes&rollback=yes", "from=failed", "from=verify", "from="} {
			f.Add(string(c), s)
		}
	}
	f.Fuzz(func(t *testing.T, change, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		c := runChange(change)
		got, err := decodeRunChange(c, v)
		if err != nil {
			return
		}
		switch c {
		case runApprove:
			if !validDigest(got.Digest) || got.Digest != v.Get("digest") {
				t.Fatalf("decodeRunChange(approve, %q) accepted digest %q", body, got.Digest)
			}
		case runReject, runCancel, runUrgent, runAbort:
			optional := c == runCancel || c == runAbort
			if len(got.Reason) > maxReason || hasControl(got.Reason) || !optional && got.Reason == "" {
				t.Fatalf("decodeRunChange(%s, %q) accepted reason %q", c, body, got.Reason)
			}
			if optional && v.Get("confirm") != "yes" {
				t.Fatalf("decodeRunChange(%s, %q) accepted no confirmation", c, body)
			}
			if got.Rollback && (c != runCancel || v.Get("rollback") != "yes") {
				t.Fatalf("decodeRunChange(%s, %q) rolls back", c, body)
			}
		case runRetry:
			if got.From != "" && got.From != "failed" {
				t.Fatalf("decodeRunChange(retry, %q) accepted from %q", body, got.From)
			}
		case runPause, runResume, runPromote:
		default:
			t.Fatalf("decodeRunChange accepted the change %q", change)
		}
		if got.Next != "" && safeNext(got.Next) != got.Next {
			t.Fatalf("decodeRunChange(%s, %q) accepted next %q", c, body, got.Next)
		}
	})
}

func FuzzDecodeScheduleFilter(f *testing.F) {
	for _, s := range []string{"cluster=prod&state=ACTIVE", "state=pending_approve", "state=BOGUS", "state=%00",
		"marker=nightly", "marker=Bad%20Name", "marker=../x", "cluster=%07", "cluster=" + strings.Repeat("c", 201)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		got, err := decodeScheduleFilter(v)
		if err != nil {
			return
		}
		if got.State != "" && !slices.Contains(scheduleStates, got.State) {
			t.Fatalf("decodeScheduleFilter(%q) accepted state %q", query, got.State)
		}
		if got.Marker != "" && names.CheckID(got.Marker) != nil {
			t.Fatalf("decodeScheduleFilter(%q) accepted marker %q", query, got.Marker)
		}
		if len(got.Cluster) > maxFilter || hasControl(got.Cluster) {
			t.Fatalf("decodeScheduleFilter(%q) accepted cluster %q", query, got.Cluster)
		}
		if again, err := decodeScheduleFilter(got.values()); err != nil || again.State != got.State || again.Cluster != got.Cluster {
			t.Fatalf("decodeScheduleFilter(%q): its values %v decode to %+v, %v", query, got.values(), again, err)
		}
	})
}
