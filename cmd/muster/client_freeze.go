package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// newFreezeCmd is `muster freeze`: freezes kept in the store
// (docs/cli.md, "muster freeze").
func newFreezeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "freeze",
		Short: "Freeze a cluster now, list freezes, lift one early",
	}
	f := bindClientFlags(cmd)
	printFreeze := func(cmd *cobra.Command, fr *wire.Freeze, verb string) error {
		if f.json() {
			return f.write(cmd.OutOrStdout(), fr)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s freeze %s of cluster %s until %s: %s\n", verb, textsafe.Escape(fr.ID),
			textsafe.Escape(fr.ClusterID), fr.To.Local().Format(time.RFC3339), textsafe.Escape(fr.Reason))
		return nil
	}
	var until, from, reason string
	var dur time.Duration
	create := &cobra.Command{
		Use:   "create CLUSTER (--until TIME | --for DURATION) --reason TEXT",
		Short: "Freeze a cluster: nothing disruptive goes to it until then, on every replica (operator, approver)",
		Example: `  muster freeze create prod --until 18:00 --reason "incident 4711"
  muster freeze create prod --for 2h --reason "incident 4711"`,
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			var req wire.CreateFreezeRequest
			switch {
			case (until == "") == (dur == 0):
				return cli.UsageError("give one of --until and --for")
			case dur < 0:
				return cli.UsageError("--for %s: want a positive duration like 2h", dur)
			case reason == "":
				return cli.UsageError("--reason is required: say why the cluster is frozen")
			}
			start, err := parseWhen("--from", from, now)
			if err != nil {
				return err
			}
			req.From, req.Reason = start, reason
			if dur > 0 {
				base := now
				if start != nil {
					base = *start
				}
				req.Until = base.Add(dur)
			} else {
				t, err := parseWhen("--until", until, now)
				if err != nil {
					return err
				}
				req.Until = *t
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			fr, err := c.CreateFreeze(cmd.Context(), args[0], req)
			if err != nil {
				return apiError(c, err)
			}
			return printFreeze(cmd, fr, "Created")
		},
	}
	create.Flags().StringVar(&until, "until", "", "when the freeze ends: an RFC 3339 time, or a local time like 18:00 (the next one)")
	create.Flags().DurationVar(&dur, "for", 0, "how long the freeze lasts, from now (or --from)")
	create.Flags().StringVar(&from, "from", "", "when the freeze begins, if not now (as --until)")
	create.Flags().StringVar(&reason, "reason", "", "why (required; shown wherever the freeze holds work)")

	var cluster string
	var all bool
	list := &cobra.Command{
		Use:   "list [--cluster C] [--all]",
		Short: "List the freezes in force or to come (--all: lifted and ended ones too, with who lifted them and why)",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			fs, err := c.Freezes(cmd.Context(), cluster, all)
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.FreezeList{Freezes: fs}, "ID", "CLUSTER", "FROM", "UNTIL", "BY", "SOURCE", "REASON", "LIFTED")
			for _, fr := range fs {
				lifted := ""
				if fr.LiftedTS != nil {
					lifted = fmt.Sprintf("%s by %s: %s", fr.LiftedTS.Local().Format(time.RFC3339), fr.LiftedBy, fr.LiftReason)
				}
				src := fr.Source
				if src == "" {
					src = "api"
				}
				l.add(fr.ID, fr, textsafe.Escape(fr.ID), textsafe.Escape(fr.ClusterID), fr.From.Local().Format(time.RFC3339),
					fr.To.Local().Format(time.RFC3339), textsafe.Escape(fr.CreatedBy), textsafe.Escape(src),
					textsafe.Escape(fr.Reason), textsafe.Escape(lifted))
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
	list.Flags().StringVar(&cluster, "cluster", "", "only this cluster's")
	list.Flags().BoolVar(&all, "all", false, "lifted and ended freezes too")

	var liftReason string
	lift := &cobra.Command{
		Use:     "lift ID --reason TEXT",
		Short:   "Lift a freeze before its end: what it held goes at once (approver)",
		Example: `  muster freeze lift 3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11 --reason "incident closed"`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if liftReason == "" {
				return cli.UsageError("--reason is required: say why the freeze may end early")
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			fr, err := c.LiftFreeze(cmd.Context(), args[0], liftReason)
			if err != nil {
				return apiError(c, err)
			}
			return printFreeze(cmd, fr, "Lifted")
		},
	}
	lift.Flags().StringVar(&liftReason, "reason", "", "why it may end early (required)")
	cmd.AddCommand(create, list, lift)
	return cmd
}
