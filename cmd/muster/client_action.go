package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newActionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "action",
		Short: "Create, list, approve and follow actions",
		Long: `Create, list, approve and follow actions. An ACTION argument is an action id
or a unique prefix of it of at least 8 characters.`,
	}
	f := bindClientFlags(cmd)
	cmd.AddCommand(
		newActionListCmd(f),
		newActionShowCmd(f),
		newActionCreateCmd(f),
		newActionVerbCmd(f, "approve", "Approve an action waiting for approval (approver role)"),
		newActionVerbCmd(f, "reject", "Reject an action waiting for approval (approver role)"),
		newActionVerbCmd(f, "urgent", "Let an action pass its cluster's closed maintenance window, never a freeze (approver role, --reason required)"),
		newActionVerbCmd(f, "cancel", "Cancel an action (at once while it waits for approval; once scheduled, the agent decides)"),
		newActionVerbCmd(f, "retry", "Create a new action with the content of a finished one"),
		newActionWatchCmd(f),
		newActionLogsCmd(f),
	)
	return cmd
}

func newActionListCmd(f *clientFlags) *cobra.Command {
	var flt client.ActionFilter
	var states, kinds []string
	var all bool
	var watch watchFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List actions, newest first",
		Example: `  muster action list --cluster prod --state RUNNING,NEW
  muster action list --run 3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11
  muster action list --sort created_ts:asc --limit 10
  muster action list --all -o json
  muster action list --cluster prod -w`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			for _, s := range states {
				st, err := action.ParseState(strings.ToUpper(s))
				if err != nil {
					return cli.UsageError("--state: %v", err)
				}
				flt.States = append(flt.States, st)
			}
			flt.Kinds = kinds
			var next string
			fetch := func(ctx context.Context) (*listing, error) {
				flt := flt
				page, err := c.Actions(ctx, flt)
				if err != nil {
					return nil, apiError(c, err)
				}
				for all && page.NextMarker != "" {
					flt.Marker = page.NextMarker
					more, err := c.Actions(ctx, flt)
					if err != nil {
						return nil, apiError(c, err)
					}
					page.Actions = append(page.Actions, more.Actions...)
					page.NextMarker = more.NextMarker
				}
				next = page.NextMarker
				return actionListing(page), nil
			}
			if err := watch.list(cmd.Context(), cmd.OutOrStdout(), f, fetch); err != nil {
				return err
			}
			if next != "" && !watch.on {
				fmt.Fprintf(cmd.ErrOrStderr(), "More actions follow: add --marker %s (or --all).\n", textsafe.Escape(next))
			}
			return nil
		},
	}
	watch.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&flt.Cluster, "cluster", "", "only this cluster")
	fl.StringVar(&flt.Node, "node", "", "only this node")
	fl.StringVar(&flt.Run, "run", "", "only the child actions of this run (its id or a unique prefix of 8+ characters)")
	fl.StringSliceVar(&states, "state", nil, "only these states (comma list)")
	fl.StringSliceVar(&kinds, "kind", nil, "only these kinds (comma list)")
	fl.StringVar(&flt.Sort, "sort", "", "order, like created_ts:desc,id:asc")
	fl.IntVar(&flt.Limit, "limit", 0, "actions per page (default 50, at most 500)")
	fl.StringVar(&flt.Marker, "marker", "", "start after this action id (the next_marker of the previous page)")
	fl.BoolVar(&all, "all", false, "follow every page")
	return cmd
}

func newActionShowCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ACTION",
		Short: "Show one action with its history",
		Args:  exactArgs("ACTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			v, err := c.ActionView(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), v)
			}
			if err := printAction(cmd.OutOrStdout(), &v.Action); err != nil {
				return err
			}
			printLevels(cmd.OutOrStdout(), v.Approval)
			return nil
		},
	}
}

// actionListing is a page of actions as action list prints it: -o wide
// adds the full id, the args, the reason, the approver, the child's step
// and attempt, and when it last changed.
func actionListing(page *wire.ActionList) *listing {
	l := &listing{records: page,
		header: []string{"ID", "CLUSTER", "NODE", "KIND", "STATE", "REQUESTER", "RUN", "CREATED"},
		wide: []string{"ID", "CLUSTER", "NODE", "KIND", "ARGS", "STATE", "REASON", "REQUESTER", "APPROVED BY",
			"RUN", "STEP", "ATTEMPT", "CREATED", "UPDATED"}}
	for _, a := range page.Actions {
		attempt := attemptText(&a)
		l.rows = append(l.rows, listRow{key: a.ID, record: a,
			cells: []string{shortID(a.ID), a.ClusterID, a.NodeID, a.Kind, string(a.State), a.Requester, runPlace(&a), ts(a.CreatedTS)},
			wide: []string{a.ID, a.ClusterID, a.NodeID, a.Kind, string(a.Args), string(a.State), a.StateReason, a.Requester, a.ApprovedBy,
				runPlace(&a), a.Step, attempt, ts(a.CreatedTS), ts(a.UpdatedTS)}})
	}
	return l
}

// attemptText shows a run's child's attempt ("" for an action of its own,
// or a child stored before attempts were counted).
func attemptText(a *action.Action) string {
	if a.RunID == "" || a.Attempt == 0 {
		return ""
	}
	return strconv.Itoa(a.Attempt)
}

// wave shows a child's wave ("" for none).
func wave(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// runPlace says where a run's child belongs: run (short id), stage and
// wave; "" for an action of its own.
func runPlace(a *action.Action) string {
	if a.RunID == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/w%d", shortID(a.RunID), a.Stage, a.Wave)
}

func printAction(w io.Writer, a *action.Action) error {
	t := newTable(w, "ID", a.ID)
	state := string(a.State)
	if a.StateReason != "" {
		state += " (" + a.StateReason + ")"
	}
	for _, kv := range [][2]string{
		{"Cluster", a.ClusterID}, {"Node", a.NodeID}, {"Kind", a.Kind}, {"Args", string(a.Args)},
		{"State", state}, {"Origin", a.Origin}, {"Requester", a.Requester}, {"Approved by", a.ApprovedBy},
		{"Retry of", a.RetryOf}, {"Run", a.RunID}, {"Stage", a.Stage}, {"Step", a.Step}, {"Attempt", attemptText(a)},
		{"Wave", wave(a.Wave)},
		{"Timeout", timeoutText(a.TimeoutS)}, {"Created", ts(a.CreatedTS)},
		{"Not before", tsPtr(a.NotBefore)}, {"Urgent", a.Urgent},
		{"Scheduled", tsPtr(a.ScheduledTS)}, {"Started", tsPtr(a.StartedTS)}, {"Finished", tsPtr(a.FinishedTS)},
		{"Updated", ts(a.UpdatedTS)},
	} {
		t.row(kv[0], kv[1])
	}
	if len(bytes.TrimSpace(a.Progress)) > 0 && string(a.Progress) != "{}" && string(a.Progress) != "null" {
		t.row("Progress", string(a.Progress))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if a.Output != "" {
		// Line by line: a newline of the output is a line break, any other
		// control character an escape.
		fmt.Fprintf(w, "\nOutput:\n%s\n", cli.SafeLines(strings.TrimSuffix(a.Output, "\n")))
	}
	if len(a.History) > 0 {
		fmt.Fprintln(w, "\nHistory:")
		h := newTable(w, "TIME", "FROM", "TO", "ACTOR", "REASON")
		for _, tr := range a.History {
			h.row(ts(tr.TS), string(tr.From), string(tr.To), tr.Actor, tr.Reason)
		}
		return h.flush()
	}
	return nil
}

// printLevels prints where an approval stands, one line a level ("level 2
// (sre): 0 of 1 — can approve: sam, sue"), then what is still needed ("1
// more from sre"); nothing when there is none.
func printLevels(w io.Writer, ap *wire.Approval) {
	if ap == nil {
		return
	}
	fmt.Fprintln(w, "\nApproval:")
	for _, l := range ap.Lines {
		fmt.Fprintln(w, "  "+textsafe.Escape(l))
	}
	if !ap.Satisfied {
		fmt.Fprintf(w, "  Still needed: %s.\n", textsafe.Escape(ap.Missing))
	}
	if ap.Void > 0 {
		fmt.Fprintf(w, "  (%d approval(s) of content since changed count for nothing)\n", ap.Void)
	}
}

func timeoutText(s int) string {
	if s == 0 {
		return "agent default"
	}
	return (time.Duration(s) * time.Second).String()
}

// parseArgs builds the args object from --args (a JSON object) and the
// --arg key=value pairs on top of it; a value is JSON when it parses as JSON,
// else a string.
func parseArgs(raw string, pairs []string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if raw != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || obj == nil {
			return nil, cli.UsageError("--args must be a JSON object, like '{\"seconds\": 30}'")
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, cli.UsageError("--arg %q: want key=value", p)
		}
		if json.Valid([]byte(v)) {
			obj[k] = json.RawMessage(v)
		} else {
			s, _ := json.Marshal(v)
			obj[k] = s
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, cli.UsageError("args: %v", err)
	}
	return b, nil
}

// argHint adds to a refusal of args by a kind's args_schema, where a
// string was wanted and an --arg value was sent as JSON (version=2.0 is a
// number), how to send it as a string.
func argHint(err error, pairs []string) error {
	if err == nil {
		return nil
	}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		if !json.Valid([]byte(v)) || strings.HasPrefix(strings.TrimSpace(v), `"`) {
			continue
		}
		for _, got := range []string{"number", "boolean", "null"} {
			if strings.Contains(err.Error(), "args."+k+": got "+got+", want string") {
				return fmt.Errorf("%w; --arg %s sent a JSON %s: for a string, quote it: --arg '%s=\"%s\"'", err, k, got, k, v)
			}
		}
	}
	return err
}

func newActionCreateCmd(f *clientFlags) *cobra.Command {
	var req wire.CreateActionRequest
	var rawArgs string
	var pairs []string
	var timeout time.Duration
	var notBefore, tgt string
	cmd := &cobra.Command{
		Use:   "create --cluster C (--node N | --target T) --kind K [--arg key=value]... [--args JSON]",
		Short: "Create an action on one node, or one per node of a target",
		Long: `Create an action on one node (--node), or one action per node of a target
(--target: a label selector, node=N1,N2, or all), all or none: args that one
node's args_schema refuses create nothing, and the error names that node.`,
		Example: `  muster action create --cluster prod --node db-1 --kind muster.io/debug.sleep --arg seconds=30
  muster action create --cluster prod --target role=db --kind muster.io/debug.ping
  muster action create --cluster prod --node db-1 --kind example.com/db.backup --args '{"full": true}' --timeout 2h
  muster action create --cluster prod --node db-1 --kind example.com/pkg.upgrade --not-before 02:00`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for name, v := range map[string]string{"cluster": req.ClusterID, "kind": req.Kind} {
				if v == "" {
					return cli.UsageError("--%s is required (see 'muster action create --help')", name)
				}
			}
			switch {
			case req.NodeID == "" && tgt == "":
				return cli.UsageError("--node or --target is required (see 'muster action create --help')")
			case req.NodeID != "" && tgt != "":
				return cli.UsageError("give --node or --target, not both")
			case tgt != "":
				if req.ID != "" {
					return cli.UsageError("--id names one action: a --target makes one per node, each with an id of its own")
				}
				t, err := parseTarget(tgt)
				if err != nil {
					return err
				}
				req.Target = &t
			}
			if timeout < 0 || timeout%time.Second != 0 {
				return cli.UsageError("--timeout %s: want a whole number of seconds, like 90s or 2h", timeout)
			}
			req.TimeoutS = int(timeout / time.Second)
			nb, err := parseNotBefore(notBefore, time.Now())
			if err != nil {
				return err
			}
			req.NotBefore = nb
			args, err := parseArgs(rawArgs, pairs)
			if err != nil {
				return err
			}
			req.Args = args
			c, err := f.core()
			if err != nil {
				return err
			}
			if req.Target != nil {
				// One request_id per invocation: a retry of this create
				// (after a timeout) makes nothing new.
				req.RequestID = action.NewID()
				out, err := c.CreateActions(cmd.Context(), &req)
				if err != nil {
					return argHint(apiError(c, err), pairs)
				}
				return writeCreatedActions(cmd.OutOrStdout(), f, out)
			}
			a, err := c.CreateAction(cmd.Context(), &req)
			if err != nil {
				return argHint(apiError(c, err), pairs)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), a)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Created action %s (%s)%s.\n", textsafe.Escape(a.ID), textsafe.Escape(string(a.State)), notBeforeText(a.NotBefore))
			if a.State == action.PendingApprove {
				fmt.Fprintf(w, "It waits for approval: muster action approve %s\n", textsafe.Escape(shortID(a.ID)))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.ClusterID, "cluster", "", "cluster of the node (required)")
	fl.StringVar(&req.NodeID, "node", "", "node to run the action on")
	fl.StringVar(&tgt, "target", "", "instead of --node, one action per node of: a label selector like role=db, node=N1,N2, or all")
	fl.StringVar(&req.Kind, "kind", "", "action kind, like muster.io/debug.ping (required)")
	fl.StringArrayVar(&pairs, "arg", nil, "an argument key=value (repeatable; the value is JSON when valid, else a string)")
	fl.StringVar(&rawArgs, "args", "", "all arguments as a JSON object (--arg values override its keys)")
	fl.DurationVar(&timeout, "timeout", 0, "run time limit (default: the agent's)")
	fl.StringVar(&req.ID, "id", "", "the action id to use (a UUID; default: a new one)")
	fl.StringVar(&notBefore, "not-before", "", "push it no earlier: an RFC 3339 time, or a local time like 02:00 (the next one)")
	return cmd
}

// writeCreatedActions says what a create over a target made: how many
// actions, one line each, and how to approve those that wait.
func writeCreatedActions(w io.Writer, f *clientFlags, out *wire.CreatedActions) error {
	if f.json() {
		return f.write(w, out)
	}
	n := len(out.Actions)
	fmt.Fprintf(w, "Created %d action%s:\n", n, map[bool]string{true: "", false: "s"}[n == 1])
	waiting := 0
	for _, a := range out.Actions {
		fmt.Fprintf(w, "  %s on %s (%s)%s\n", textsafe.Escape(a.ID), textsafe.Escape(a.NodeID), textsafe.Escape(string(a.State)),
			notBeforeText(a.NotBefore))
		if a.State == action.PendingApprove {
			waiting++
		}
	}
	if waiting > 0 {
		verb := "wait"
		if waiting == 1 {
			verb = "waits"
		}
		fmt.Fprintf(w, "%d %s for approval: muster action approve ID\n", waiting, verb)
	}
	return nil
}

// newActionVerbCmd builds approve, reject, cancel and retry.
func newActionVerbCmd(f *clientFlags, verb, short string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   verb + " ACTION",
		Short: short,
		Args:  exactArgs("ACTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var a *action.Action
			msg := ""
			switch verb {
			case "approve":
				var v *wire.ActionView
				if v, err = c.DecideView(ctx, args[0], verb, reason); err == nil {
					a = &v.Action
				}
				msg = "Approved action %s (%s)."
				if err == nil && v.Approval != nil && !v.Approval.Satisfied {
					msg = "Recorded the approval of action %s (%s): " + textsafe.Escape(v.Approval.Missing) + "."
				}
			case "reject":
				a, err = c.Decide(ctx, args[0], verb, reason)
				msg = "Rejected action %s (%s)."
			case "urgent":
				if strings.TrimSpace(reason) == "" {
					return cli.UsageError("--reason is required: say why it may not wait for the window")
				}
				a, err = c.Decide(ctx, args[0], verb, reason)
				msg = "Marked action %s urgent (%s): it passes a closed maintenance window, never a freeze."
			case "cancel":
				var requested bool
				a, requested, err = c.CancelBecause(ctx, args[0], reason)
				msg = "Cancelled action %s (%s)."
				if requested {
					msg = "Cancel of action %s requested; the next pass settles it with the agent (%s)."
				}
			case "retry":
				a, err = c.RetryBecause(ctx, args[0], reason)
				msg = "Created action %s (%s) to retry " + textsafe.Escape(args[0]) + "."
			}
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), a)
			}
			fmt.Fprintf(cmd.OutOrStdout(), msg+"\n", textsafe.Escape(a.ID), textsafe.Escape(string(a.State)))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the action's history and the event log")
	return cmd
}

// errActionNotDone is the exit of a watch whose action ended other than DONE.
var errActionNotDone = errors.New("action did not succeed")

func newActionWatchCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "watch ACTION",
		Short: "Print each state change of an action as it happens, until it is final",
		Long: `Print each state change of an action as it happens, until it is final.
The exit status is 0 when the action ends DONE and 1 otherwise, so that
scripts can wait on an action. With -o json, each change prints the record
as one JSON line.`,
		Args: exactArgs("ACTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			return watchAction(cmd.Context(), c, args[0], cmd.OutOrStdout(), f.json())
		},
	}
}

// watchAction follows one action through the event stream. The stream is
// opened before the action is read, so no change between the two is missed;
// each event about the action re-reads it and prints the new history lines.
func watchAction(ctx context.Context, c *client.Core, ref string, w io.Writer, asJSON bool) error {
	a, err := c.Action(ctx, ref)
	if err != nil {
		return apiError(c, err)
	}
	id := a.ID
	printed := 0
	show := func(a *action.Action) error {
		if asJSON {
			if len(a.History) > printed {
				printed = len(a.History)
				rec := *a
				rec.History = nil
				return writeJSONLine(w, &rec)
			}
			return nil
		}
		for ; printed < len(a.History); printed++ {
			tr := a.History[printed]
			line := fmt.Sprintf("%s  %s  %s", ts(tr.TS), shortID(id), tr.To)
			if tr.From == tr.To {
				line = fmt.Sprintf("%s  %s  %s (%s)", ts(tr.TS), shortID(id), tr.To, tr.Reason)
			} else if tr.Reason != "" {
				line += "  " + tr.Reason
			}
			if tr.Actor != "" {
				line += "  by " + tr.Actor
			}
			if _, err := fmt.Fprintln(w, textsafe.Escape(line)); err != nil {
				return err
			}
		}
		return nil
	}
	since := int64(-1)
	for attempt := 0; ; {
		s, err := c.Stream(ctx, since, client.EventFilter{ActionID: id})
		if err != nil {
			return apiError(c, err)
		}
		err = func() error {
			defer s.Close()
			a, err := c.Action(ctx, id)
			if err != nil {
				return apiError(c, err)
			}
			for {
				if err := show(a); err != nil {
					return err
				}
				if a.State.Final() {
					if a.State != action.Done {
						reason := ""
						if a.StateReason != "" {
							reason = ": " + a.StateReason
						}
						return fmt.Errorf("%w: %s ended %s%s", errActionNotDone, id, a.State, reason)
					}
					return nil
				}
				if _, err := s.Next(); err != nil {
					since = s.LastID()
					return err
				}
				attempt = 0
				if a, err = c.Action(ctx, id); err != nil {
					return apiError(c, err)
				}
			}
		}()
		if !errors.Is(err, client.ErrStreamClosed) || ctx.Err() != nil {
			return err
		}
		// The core closed the stream (a restart): resume where it ended.
		attempt++
		if attempt > 5 {
			return fmt.Errorf("event stream of %s: %w", c.Addr(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}
