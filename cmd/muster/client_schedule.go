package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Start a playbook on a cron expression, approved once",
		Long: `A schedule starts a stored playbook on a cluster at each occurrence of a cron
expression in a time zone. An approver other than its creator approves it once;
each occurrence then makes a run already approved by that approver. A change to
the schedule, or a new playbook version under --version latest, sends it back
to approval. See docs/schedules.md.`,
	}
	f := bindClientFlags(cmd)
	cmd.AddCommand(newScheduleCreateCmd(f), newScheduleListCmd(f), newScheduleShowCmd(f), newScheduleApproveCmd(f),
		newScheduleVerbCmd(f, "reject", "Reject a schedule waiting for approval (approver role)"),
		newScheduleVerbCmd(f, "pause", "Make no run until resumed; runs under way go on"),
		newScheduleVerbCmd(f, "resume", "Go on from the next occurrence; those missed while paused are not run"),
		newScheduleDeleteCmd(f))
	return cmd
}

// writeSchedules prints schedules in an -o form; -o name prints their names.
func (f *clientFlags) writeSchedules(w io.Writer, v any, list ...wire.Schedule) error {
	if f.output == "name" {
		for _, sc := range list {
			if _, err := fmt.Fprintln(w, textsafe.Escape(sc.Name)); err != nil {
				return err
			}
		}
		return nil
	}
	return f.write(w, v)
}

func newScheduleCreateCmd(f *clientFlags) *cobra.Command {
	var req wire.CreateScheduleRequest
	var version string
	var params []string
	cmd := &cobra.Command{
		Use:   "create NAME --cluster C --playbook P --cron EXPR [flags]",
		Short: "Create a schedule, or change the one of that name; either waits for approval",
		Example: `  muster schedule create nightly-patch --cluster prod --playbook patch --cron "0 2 * * *" --timezone Europe/Berlin
  muster schedule create backups --cluster prod --playbook backup-all --version 3 --cron "@every 6h" --param mode=incremental --concurrency allow`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			for _, flag := range []string{"cluster", "playbook", "cron"} {
				if !cmd.Flags().Changed(flag) {
					return cli.UsageError("--%s is required", flag)
				}
			}
			v, err := wire.ParseVersionRef(version)
			if err != nil {
				return cli.UsageError("--%v", err)
			}
			req.Version = v
			if req.Params, err = parseParams(params); err != nil {
				return err
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			sc, err := c.ApplySchedule(cmd.Context(), &req)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.writeSchedules(cmd.OutOrStdout(), sc, *sc)
			}
			w := cmd.OutOrStdout()
			switch sc.Outcome {
			case "unchanged":
				fmt.Fprintf(w, "Schedule %s is unchanged (%s).\n", textsafe.Escape(sc.Name), textsafe.Escape(sc.State))
				return nil
			case "changed":
				fmt.Fprintf(w, "Changed schedule %s: it waits for approval again.\n", textsafe.Escape(sc.Name))
			default:
				fmt.Fprintf(w, "Created schedule %s: it waits for approval.\n", textsafe.Escape(sc.Name))
			}
			fmt.Fprintf(w, "An approver other than you: muster schedule approve %s\n", textsafe.Escape(sc.Name))
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Cluster, "cluster", "", "the cluster to run on (required)")
	cmd.Flags().StringVar(&req.Playbook, "playbook", "", "the stored playbook to start (required)")
	cmd.Flags().StringVar(&version, "version", "latest", "the playbook version, or latest (each new version needs approval again)")
	cmd.Flags().StringVar(&req.Cron, "cron", "", `five cron fields or a descriptor such as @daily or "@every 6h" (required)`)
	cmd.Flags().StringVar(&req.Timezone, "timezone", "", "the IANA time zone the cron is read in (default UTC)")
	cmd.Flags().StringVar(&req.Concurrency, "concurrency", "forbid", "forbid: skip an occurrence while the previous run is open; allow: run anyway")
	cmd.Flags().StringVar(&req.CatchUp, "catch-up", "", "how old an occurrence missed while no core ran may be and still run (default 10m)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter key=value (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("concurrency", fixed("forbid", "allow"))
	_ = cmd.RegisterFlagCompletionFunc("playbook", ask(completePlaybooks))
	return cmd
}

func nextText(sc *wire.Schedule) string {
	if len(sc.Next) == 0 {
		return "-"
	}
	return ts(sc.Next[0])
}

func newScheduleListCmd(f *clientFlags) *cobra.Command {
	var flt client.ScheduleFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules with their state and next occurrence, by name",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			for i, s := range flt.States {
				flt.States[i] = strings.ToUpper(s)
			}
			page, err := c.SchedulePage(cmd.Context(), flt)
			if err != nil {
				return apiError(c, err)
			}
			list := page.Schedules
			if f.json() {
				return f.writeSchedules(cmd.OutOrStdout(), page, list...)
			}
			head := []string{"NAME", "STATE", "CLUSTER", "PLAYBOOK", "VERSION", "CRON", "TIMEZONE", "NEXT"}
			if f.wide() {
				head = append(head, "CONCURRENCY", "REQUESTER", "APPROVED BY", "LAST")
			}
			t := newTable(cmd.OutOrStdout(), head...)
			for i := range list {
				sc := &list[i]
				row := []string{textsafe.Escape(sc.Name), textsafe.Escape(sc.State), textsafe.Escape(sc.Cluster),
					textsafe.Escape(sc.Playbook), sc.Version.String(), textsafe.Escape(sc.Cron), textsafe.Escape(sc.Timezone), nextText(sc)}
				if f.wide() {
					row = append(row, textsafe.Escape(sc.Concurrency), textsafe.Escape(sc.Requester), textsafe.Escape(sc.ApprovedBy),
						tsPtr(sc.LastOccurrence))
				}
				t.row(row...)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if page.NextMarker != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --marker %s\n", textsafe.Escape(page.NextMarker))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&flt.Cluster, "cluster", "", "only this cluster")
	fl.StringSliceVar(&flt.States, "state", nil, "only these states (comma list: PENDING_APPROVE, ACTIVE, PAUSED, REJECTED)")
	fl.IntVar(&flt.Limit, "limit", 0, "schedules per page (default 50, at most 200)")
	fl.StringVar(&flt.Marker, "marker", "", "start after the schedule of this name")
	return cmd
}

func printSchedule(w io.Writer, sc *wire.Schedule) error {
	state := sc.State
	if sc.StateReason != "" {
		state += " (" + sc.StateReason + ")"
	}
	version := sc.Version.String()
	if sc.PlaybookVersion > 0 && sc.Version == wire.Latest {
		version += fmt.Sprintf(" (now %d)", sc.PlaybookVersion)
	}
	approved := sc.ApprovedBy
	if approved != "" && sc.ApprovedVersion > 0 {
		approved += fmt.Sprintf(" (playbook version %d)", sc.ApprovedVersion)
	}
	keys := make([]string, 0, len(sc.Params))
	for k := range sc.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var params []string
	for _, k := range keys {
		params = append(params, k+"="+sc.Params[k])
	}
	t := newTable(w, "Name", sc.Name)
	for _, kv := range [][2]string{{"Cluster", sc.Cluster}, {"Playbook", sc.Playbook}, {"Version", version},
		{"Params", strings.Join(params, " ")}, {"Cron", sc.Cron}, {"Time zone", sc.Timezone},
		{"Concurrency", sc.Concurrency}, {"Catch up", sc.CatchUp}, {"State", state}, {"Requester", sc.Requester},
		{"Approved by", approved}, {"Digest", sc.Digest}, {"Last occurrence", tsPtr(sc.LastOccurrence)},
		{"Created", ts(sc.CreatedTS)}} {
		t.row(kv[0], textsafe.Escape(kv[1]))
	}
	if sc.Source != "" {
		t.row("Source", textsafe.Escape(sc.Source))
	}
	if err := t.flush(); err != nil {
		return err
	}
	printLevels(w, sc.Approval)
	if len(sc.Next) > 0 {
		fmt.Fprintln(w, "\nNext occurrences:")
		loc, err := time.LoadLocation(sc.Timezone)
		if err != nil {
			loc = time.UTC
		}
		for _, n := range sc.Next {
			fmt.Fprintf(w, "  %s  (%s)\n", ts(n), n.In(loc).Format("2006-01-02 15:04 MST"))
		}
	}
	if len(sc.Runs) > 0 {
		fmt.Fprintln(w, "\nRuns:")
		r := newTable(w, "ID", "STATE", "CREATED")
		for _, run := range sc.Runs {
			r.row(textsafe.Escape(run.ID), textsafe.Escape(run.State), ts(run.CreatedTS))
		}
		return r.flush()
	}
	return nil
}

func newScheduleShowCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule, its next occurrences and its newest runs",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			sc, err := c.Schedule(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.writeSchedules(cmd.OutOrStdout(), sc, *sc)
			}
			return printSchedule(cmd.OutOrStdout(), sc)
		},
	}
}

func newScheduleApproveCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve a schedule as shown (approver role, not its creator): its occurrences make approved runs",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			// Approve what is shown: the schedule as read now, by its digest.
			shown, err := c.Schedule(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if !f.json() {
				fmt.Fprintf(cmd.OutOrStdout(), "Schedule %s by %s: playbook %s version %s on %s at %q (%s), digest %.12s\n",
					textsafe.Escape(shown.Name), textsafe.Escape(shown.Requester), textsafe.Escape(shown.Playbook),
					textsafe.Escape(shown.Version.String()), textsafe.Escape(shown.Cluster), textsafe.Escape(shown.Cron),
					textsafe.Escape(shown.Timezone), shown.Digest)
			}
			sc, err := c.ApproveSchedule(cmd.Context(), shown.Name, shown.Digest)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.writeSchedules(cmd.OutOrStdout(), sc, *sc)
			}
			if sc.Approval != nil && !sc.Approval.Satisfied {
				fmt.Fprintf(cmd.OutOrStdout(), "Recorded the approval of schedule %s (%s): %s.\n", textsafe.Escape(sc.Name),
					textsafe.Escape(sc.State), textsafe.Escape(sc.Approval.Missing))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Approved schedule %s (%s); next occurrence %s.\n", textsafe.Escape(sc.Name),
				textsafe.Escape(sc.State), nextText(sc))
			return nil
		},
	}
}

func newScheduleVerbCmd(f *clientFlags, verb, short string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			sc, err := c.ScheduleVerb(cmd.Context(), args[0], verb, reason)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.writeSchedules(cmd.OutOrStdout(), sc, *sc)
			}
			past := map[string]string{"reject": "Rejected", "pause": "Paused", "resume": "Resumed"}[verb]
			fmt.Fprintf(cmd.OutOrStdout(), "%s schedule %s (%s).\n", past, textsafe.Escape(sc.Name), textsafe.Escape(sc.State))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the schedule's state and its event")
	return cmd
}

func newScheduleDeleteCmd(f *clientFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule; the runs it made stay and go on",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0], reason); err != nil {
				return apiError(c, err)
			}
			if f.output == "name" {
				fmt.Fprintln(cmd.OutOrStdout(), textsafe.Escape(args[0]))
				return nil
			}
			if !f.json() {
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted schedule %s.\n", textsafe.Escape(args[0]))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the event")
	return cmd
}
