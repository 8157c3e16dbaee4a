package ui

import (
	"net/url"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// runStates are the run states, in their order (docs/architecture.md, "Runs and
// playbooks").
var runStates = []string{store.RunPendingApprove, store.RunRunning, store.RunPaused, store.RunDone, store.RunPartial,
	store.RunFailed, store.RunCancelled, store.RunAborted}

// listFilter is the filter of a list page by cluster and state, paged by
// a marker: the Runs and Schedules pages.
type listFilter struct {
	Cluster, State, Marker string
}

// decodeListFilter decodes a list filter whose state is one of states and
// whose marker passes validMarker (what names the marker in an error).
func decodeListFilter(v url.Values, states []string, validMarker func(string) bool, what string) (listFilter, error) {
	var f listFilter
	var err error
	if f.Cluster, err = plainField(v, "cluster", maxFilter); err != nil {
		return f, err
	}
	if s := strings.ToUpper(strings.TrimSpace(v.Get("state"))); s != "" {
		if !slices.Contains(states, s) {
			return f, formError("state %q is not one of %s", v.Get("state"), strings.Join(states, ", "))
		}
		f.State = s
	}
	if m := v.Get("marker"); m != "" {
		if !validMarker(m) {
			return f, formError("marker is not %s", what)
		}
		f.Marker = m
	}
	return f, nil
}

// values returns the filter as a query string (without the marker).
func (f listFilter) values() url.Values {
	v := url.Values{}
	if f.Cluster != "" {
		v.Set("cluster", f.Cluster)
	}
	if f.State != "" {
		v.Set("state", f.State)
	}
	return v
}

// runFilter is the filter of the Runs page.
type runFilter struct{ listFilter }

func decodeRunFilter(v url.Values) (runFilter, error) {
	f, err := decodeListFilter(v, runStates, action.ValidID, "a run id")
	return runFilter{f}, err
}

// query returns the store query of the filter, for one page of n.
func (f runFilter) query(n int) store.RunQuery {
	q := store.RunQuery{ClusterID: f.Cluster, Marker: f.Marker, Limit: n}
	if f.State != "" {
		q.States = []string{f.State}
	}
	return q
}

// runChange is a change the run page offers.
type runChange string

const (
	runApprove runChange = "approve"
	runReject  runChange = "reject"
	runPause   runChange = "pause"
	runResume  runChange = "resume"
	runCancel  runChange = "cancel"
	runPromote runChange = "promote"
	// runAbort stops a paused run or a canary and rolls back its nodes.
	runAbort runChange = "abort"
	// runUrgent lets the run's children pass a closed window.
	runUrgent runChange = "urgent"
	// runRetry makes a new run over the nodes a finished run did not
	// carry through; from "failed", each failed node from its failed step.
	runRetry runChange = "retry"
)

// runChangeForm is the form of a run change.
type runChangeForm struct {
	// Reason is a rejection's (required) or a cancellation's or an
	// abort's (optional).
	Reason string
	// Rollback: the cancel rolls back the nodes the run started.
	Rollback bool
	// Digest is what the approver was shown (required to approve).
	Digest string
	// From is where a retry starts each failed node: "" (its first step)
	// or "failed" (its failed step).
	From string
	Next string // "" when absent or unsafe
}

// validDigest reports a run digest: 64 lowercase hex digits.
func validDigest(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

func decodeRunChange(c runChange, v url.Values) (runChangeForm, error) {
	var f runChangeForm
	switch c {
	case runApprove:
		d := v.Get("digest")
		if !validDigest(d) {
			return f, formError("the form lacks the digest of the run you were shown; reload the run and approve again")
		}
		f.Digest = d
	case runUrgent:
		reason, err := plainField(v, "reason", maxReason)
		if err != nil {
			return f, err
		}
		if reason == "" {
			return f, formError("marking urgent needs a reason: say why it may not wait for the window")
		}
		f.Reason = reason
	case runAbort:
		reason, err := plainField(v, "reason", maxReason)
		if err != nil {
			return f, err
		}
		if v.Get("confirm") != "yes" {
			return f, formError("tick the box to confirm: aborting rolls back the nodes the run started and ends it")
		}
		f.Reason = reason
	case runReject, runCancel:
		reason, err := plainField(v, "reason", maxReason)
		if err != nil {
			return f, err
		}
		if c == runReject && reason == "" {
			return f, formError("a rejection needs a reason, for the requester and the audit trail")
		}
		if c == runCancel && v.Get("confirm") != "yes" {
			return f, formError("tick the box to confirm: cancelling ends the run and its unfinished children")
		}
		f.Reason, f.Rollback = reason, c == runCancel && v.Get("rollback") == "yes"
	case runResume, runPromote:
		// The engine says when a reason is required: to promote, and to
		// resume past errors (it forgives them).
		reason, err := plainField(v, "reason", maxReason)
		if err != nil {
			return f, err
		}
		f.Reason = reason
	case runRetry:
		switch from := v.Get("from"); from {
		case "", wire.RetryFromFailed:
			f.From = from
		default:
			return f, formError("a retry starts from the first step or from the failed step (%q), not %q", wire.RetryFromFailed, from)
		}
	case runPause:
	default:
		return f, formError("%q is not a run change", c)
	}
	f.Next = safeNext(v.Get("next"))
	return f, nil
}
