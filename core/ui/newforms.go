package ui

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Limits of the New action and New schedule forms.
const (
	// maxArgsField is the largest args text taken: a little over what an
	// action may carry, so that the check says how large is too large.
	maxArgsField = action.MaxArgs + 1024
	// maxParamsField is the largest params text of a schedule.
	maxParamsField = 16 << 10
	// notBeforeLayout is what a datetime-local field sends.
	notBeforeLayout = "2006-01-02T15:04"
)

// fieldErrs are the errors of a form, by field ("" for the form as a
// whole), shown next to each field.
type fieldErrs map[string]string

func (e fieldErrs) set(field, msg string) {
	if _, ok := e[field]; !ok {
		e[field] = msg
	}
}

// newActionForm is the New action form as typed, shown again with its
// errors when it is refused.
type newActionForm struct {
	Cluster, Node, Kind, Args, NotBefore, Timeout string
	// Target, instead of Node: a label selector such as role=db, or all
	// (target.Parse); one action per node it picks.
	Target string
	// RequestID names one submission of the form: a create over labels
	// made with it (ops.CreateActions) makes nothing new when the same
	// form is posted again (a refresh of the answer).
	RequestID string
}

// decodeNewAction reads the New action form into the request the API's
// create takes, checked as the API checks it (ops.CheckAction, or
// ops.CheckActionTarget with a target) at now. Each refused field has its
// message in the returned fieldErrs; the request is usable only when it is
// empty, and the target is nil when it names one node. The args are
// checked against each node's args_schema by the create itself
// (ops.CreateAction, ops.CreateActions).
func decodeNewAction(v url.Values, now time.Time) (newActionForm, ops.ActionRequest, *target.Target, fieldErrs) {
	var f newActionForm
	var req ops.ActionRequest
	var tgt *target.Target
	errs := fieldErrs{}
	for name, dst := range map[string]*string{"cluster": &f.Cluster, "node": &f.Node, "kind": &f.Kind,
		"not_before": &f.NotBefore, "timeout": &f.Timeout, "target": &f.Target} {
		s, err := plainField(v, name, maxFilter)
		if err != nil {
			errs.set(name, formMessage(err))
			continue
		}
		*dst = s
	}
	f.RequestID = v.Get("request_id")
	if ops.CheckRequestID(f.RequestID) != nil {
		errs.set("", "the form is damaged: load it again")
		f.RequestID = ""
	}
	f.Args = strings.TrimSpace(v.Get("args"))
	switch {
	case len(f.Args) > maxArgsField:
		errs.set("args", "the args are longer than "+strconv.Itoa(action.MaxArgs)+" bytes")
		f.Args = ""
	case !utf8.ValidString(f.Args):
		errs.set("args", "the args are not valid UTF-8")
		f.Args = ""
	}
	if f.Cluster == "" {
		errs.set("cluster", "choose a cluster")
	} else if names.CheckID(f.Cluster) != nil {
		errs.set("cluster", "there is no such cluster")
	}
	switch {
	case f.Node == "" && f.Target == "":
		errs.set("node", "choose a node, or give labels below")
	case f.Node != "" && f.Target != "":
		errs.set("target", "choose a node or give labels, not both")
	case f.Target != "":
		t, err := target.Parse(f.Target)
		if err != nil {
			errs.set("target", "labels are pairs such as role=db,zone=a (every pair must match), or all")
		} else {
			tgt = &t
		}
	case names.CheckID(f.Node) != nil:
		errs.set("node", "there is no such node")
	}
	if f.Kind == "" {
		errs.set("kind", "choose a kind")
	} else if !action.ValidKind(f.Kind) {
		errs.set("kind", "a kind is of the form domain/name, such as muster.io/debug.ping")
	}
	args := f.Args
	if args == "" {
		args = "{}"
	}
	if _, ok := errs["args"]; !ok {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
			errs.set("args", "the args are a JSON object, such as {\"seconds\": 5}")
		}
	}
	if f.Timeout != "" {
		n, err := strconv.Atoi(f.Timeout)
		if err != nil || n < 0 {
			errs.set("timeout", "the timeout is a whole number of seconds")
		}
		req.TimeoutS = n
	}
	if f.NotBefore != "" {
		t, err := parseNotBefore(f.NotBefore)
		if err != nil {
			errs.set("not_before", err.Error())
		} else {
			req.NotBefore = &t
		}
	}
	if len(errs) > 0 {
		return f, req, nil, errs
	}
	req.ClusterID, req.NodeID, req.Kind, req.Args = f.Cluster, f.Node, f.Kind, json.RawMessage(args)
	check := func() error { return ops.CheckAction(&req, now) }
	if tgt != nil {
		req.RequestID = f.RequestID
		check = func() error { return ops.CheckActionTarget(&req, *tgt, now) }
	}
	if err := check(); err != nil {
		errs.set(actionField(ops.Describe(err).Message), ops.Describe(err).Message)
		return f, req, nil, errs
	}
	return f, req, tgt, errs
}

// actionField is the form field an error of ops.CheckAction or of the
// create is about, from its words ("" for the form).
func actionField(msg string) string {
	for _, c := range []struct{ word, field string }{{"args", "args"}, {"not_before", "not_before"}, {"not before", "not_before"},
		{"timeout", "timeout"}, {"kind", "kind"}, {"target", "target"}, {"label", "target"}, {"node", "node"}, {"cluster", "cluster"}} {
		if strings.Contains(msg, c.word) {
			return c.field
		}
	}
	return ""
}

// parseNotBefore reads a not-before time: what a datetime-local field
// sends (read in UTC, as the form says), or RFC 3339.
func parseNotBefore(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.ParseInLocation(notBeforeLayout, s, time.UTC); err == nil {
		return t, nil
	}
	return time.Time{}, formError("not before is a time such as 2026-12-24T02:00 (UTC) or RFC 3339")
}

// newScheduleForm is the New schedule form as typed.
type newScheduleForm struct {
	Name, Cluster, Playbook, Version, Cron, Timezone, Params, Concurrency, CatchUp string
	// Replace changes the schedule of the same name; without it, that name
	// is refused.
	Replace bool
}

// scheduleConcurrency are the concurrency choices of a schedule.
var scheduleConcurrency = []string{store.ConcurrencyForbid, store.ConcurrencyAllow}

// decodeNewSchedule reads the New schedule form into the request `muster
// schedule create` sends. Params are one name=value a line. Each refused
// field has its message in the returned fieldErrs; what needs the store
// (the playbook, the cluster) and the cron's own rules are the apply's
// and the preview's to check.
func decodeNewSchedule(v url.Values) (newScheduleForm, wire.CreateScheduleRequest, fieldErrs) {
	var f newScheduleForm
	var req wire.CreateScheduleRequest
	errs := fieldErrs{}
	for name, dst := range map[string]*string{"name": &f.Name, "cluster": &f.Cluster, "playbook": &f.Playbook,
		"version": &f.Version, "cron": &f.Cron, "timezone": &f.Timezone, "concurrency": &f.Concurrency, "catch_up": &f.CatchUp} {
		s, err := plainField(v, name, maxFilter)
		if err != nil {
			errs.set(name, formMessage(err))
			continue
		}
		*dst = s
	}
	f.Replace = v.Get("replace") == "on"
	f.Params = strings.TrimSpace(v.Get("params"))
	params, err := parseParamLines(f.Params)
	if err != nil {
		errs.set("params", formMessage(err))
		if len(f.Params) > maxParamsField || !utf8.ValidString(f.Params) {
			f.Params = ""
		}
	}
	if f.Name == "" {
		errs.set("name", "name the schedule")
	}
	if f.Cluster == "" {
		errs.set("cluster", "choose a cluster")
	}
	if f.Playbook == "" {
		errs.set("playbook", "choose a playbook")
	}
	if f.Cron == "" {
		errs.set("cron", "give a cron: five fields such as 0 2 * * *, or @daily, or @every 6h")
	}
	version, err := wire.ParseVersionRef(f.Version)
	if f.Version == "" {
		version, err = wire.ParseVersionRef("latest")
	}
	if err != nil {
		errs.set("version", "the version is a number or latest")
	}
	if f.Concurrency != "" && f.Concurrency != store.ConcurrencyForbid && f.Concurrency != store.ConcurrencyAllow {
		errs.set("concurrency", "concurrency is forbid or allow")
	}
	req = wire.CreateScheduleRequest{Name: f.Name, Cluster: f.Cluster, Playbook: f.Playbook, Version: version,
		Params: params, Cron: f.Cron, Timezone: f.Timezone, Concurrency: f.Concurrency, CatchUp: f.CatchUp}
	return f, req, errs
}

// parseParamLines reads name=value lines (blank lines skipped).
func parseParamLines(s string) (map[string]string, error) {
	if len(s) > maxParamsField {
		return nil, formError("the params are longer than %d bytes", maxParamsField)
	}
	if !utf8.ValidString(s) {
		return nil, formError("the params are not valid UTF-8")
	}
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if hasControl(line) {
			return nil, formError("line %d of the params contains control characters", i+1)
		}
		k, val, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, formError("line %d of the params is not name=value", i+1)
		}
		if _, dup := out[k]; dup {
			return nil, formError("the params name %s twice", k)
		}
		out[k] = strings.TrimSpace(val)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// cronPreview is the next n occurrences of cron in time zone tz after
// now, written in that zone, by the schedule package's parser: the
// preview of the New schedule form. A bad cron or zone is the error the
// apply would give for it.
func cronPreview(cron, tz string, now time.Time, n int) ([]string, error) {
	loc, err := schedule.LoadZone(tz)
	if err != nil {
		return nil, err
	}
	c, err := schedule.ParseCron(cron, tz)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range schedule.NextN(c, now, n) {
		out = append(out, t.In(loc).Format("Mon 2006-01-02 15:04 MST"))
	}
	return out, nil
}
