package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "See and test the notification destinations (admin role)",
		Long: `The notification destinations are configured in the core's notify: list
(docs/notifications.md). These commands show how their deliveries fare, send
a test delivery, and send a dead delivery again.`,
	}
	f := bindClientFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the destinations: backlog, last success, last failure and why",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			ds, err := c.NotifyDestinations(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.NotifyList{Destinations: ds}, "NAME", "FORMAT", "URL", "BACKLOG", "DEAD", "LAST SUCCESS", "LAST FAILURE", "WHY")
			for _, d := range ds {
				l.add(d.Name, d, d.Name, d.Format, d.URL, strconv.Itoa(d.Backlog), strconv.Itoa(d.Dead), tsPtr(d.LastSuccess),
					tsPtr(d.LastFailure), d.LastError)
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
	test := &cobra.Command{
		Use:   "test NAME",
		Short: "Send a signed test delivery to a destination and print how it answered",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			res, err := c.NotifyTest(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else if res.OK {
				fmt.Fprintf(cmd.OutOrStdout(), "%s answered %d in %d ms.\n", textsafe.Escape(res.Destination), res.Status, res.TookMS)
			}
			if !res.OK {
				return fmt.Errorf("test delivery to %s failed: status %d: %s", textsafe.Escape(res.Destination), res.Status,
					textsafe.Escape(res.Error))
			}
			return nil
		},
	}
	var state string
	var before int64
	var limit int
	deliveries := &cobra.Command{
		Use:     "deliveries NAME [--state pending|delivered|dead]",
		Short:   "List a destination's deliveries, newest first",
		Example: "  muster notify deliveries oncall --state dead",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			out, err := c.NotifyDeliveries(cmd.Context(), args[0], state, before, limit)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "ID", "EVENT", "STATE", "TRIES", "CREATED", "NEXT", "STATUS", "ERROR")
			for _, d := range out.Deliveries {
				next, status := "", ""
				if d.State == "pending" {
					next = ts(d.NextTS)
				}
				if d.LastStatus != 0 { // 0: no answer, or delivered at its first try (not kept)
					status = strconv.Itoa(d.LastStatus)
				}
				t.row(strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.EventSeq, 10), d.State, strconv.Itoa(d.Attempts),
					ts(d.CreatedTS), next, status, d.LastError)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if out.Next > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "More: --before %d\n", out.Next)
			}
			return nil
		},
	}
	deliveries.Flags().StringVar(&state, "state", "", "only deliveries in this state: pending, delivered or dead")
	deliveries.Flags().Int64Var(&before, "before", 0, "start after this delivery id (the More: line of the previous page)")
	deliveries.Flags().IntVar(&limit, "limit", 100, "deliveries per page (1 to 500)")
	redeliver := &cobra.Command{
		Use:   "redeliver ID",
		Short: "Send a delivery again: pending, due now, its tries counted anew",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 1 {
				return cli.UsageError("%q is not a delivery id (see muster notify deliveries NAME)", textsafe.Escape(args[0]))
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			d, err := c.Redeliver(cmd.Context(), id)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Delivery %d of event %d to %s is pending again.\n", d.ID, d.EventSeq, textsafe.Escape(d.Destination))
			return nil
		},
	}
	cmd.AddCommand(list, test, deliveries, redeliver)
	return cmd
}
