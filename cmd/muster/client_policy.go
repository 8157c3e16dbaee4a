package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// Policy records by hand (docs/policy-as-data.md): `muster window`,
// `muster budget` and `muster approval-rule`, each a thin shell over the
// core's /api/v1/policies calls. Every change takes a reason, and is an
// event naming who made it and why.

// policyNoun builds the commands every kind shares: list, delete and
// history; the caller adds how a record is made.
type policyNoun struct {
	kind, noun string // "window", "window"
	f          *clientFlags
	cmd        *cobra.Command
	// cells are the kind's columns of a record, after ID.
	header []string
	cells  func(spec json.RawMessage) []string
}

func newPolicyNoun(kind, use, short string, header []string, cells func(json.RawMessage) []string) *policyNoun {
	cmd := &cobra.Command{Use: use, Short: short}
	n := &policyNoun{kind: kind, noun: use, f: bindClientFlags(cmd), cmd: cmd, header: header, cells: cells}
	cmd.AddCommand(n.list(), n.delete(), n.history())
	return n
}

func (n *policyNoun) print(cmd *cobra.Command, r *wire.PolicyRecord, verb string) error {
	if n.f.json() {
		return n.f.write(cmd.OutOrStdout(), r)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s (version %d): %s\n", verb, strings.ReplaceAll(n.kind, "_", " "), textsafe.Escape(r.ID),
		r.Version, textsafe.Escape(strings.Join(n.cells(r.Spec), " ")))
	return nil
}

func (n *policyNoun) list() *cobra.Command {
	var cluster string
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--cluster C] [--all]",
		Short: "List them with who made or changed each and why (--all: deleted ones too)",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := n.f.core()
			if err != nil {
				return err
			}
			rs, err := c.Policies(cmd.Context(), n.kind, cluster, all)
			if err != nil {
				return apiError(c, err)
			}
			header := append(append([]string{"ID"}, n.header...), "SOURCE", "BY", "WHEN", "WHY")
			if all {
				header = append(header, "DELETED")
			}
			l := newListing(wire.PolicyRecordList{Policies: rs}, header...)
			for _, r := range rs {
				src := r.Source
				if src == "" {
					src = "api"
				}
				cells := []string{textsafe.Escape(r.ID)}
				for _, s := range n.cells(r.Spec) {
					cells = append(cells, textsafe.Escape(s))
				}
				cells = append(cells, textsafe.Escape(src), textsafe.Escape(r.UpdatedBy), r.UpdatedTS.Local().Format(time.RFC3339),
					textsafe.Escape(r.Reason))
				if all {
					del := ""
					if r.DeletedTS != nil {
						del = fmt.Sprintf("%s by %s: %s", r.DeletedTS.Local().Format(time.RFC3339), r.DeletedBy, r.DeleteReason)
					}
					cells = append(cells, textsafe.Escape(del))
				}
				l.add(r.ID, r, cells...)
			}
			return n.f.printList(cmd.OutOrStdout(), l)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster's")
	cmd.Flags().BoolVar(&all, "all", false, "deleted ones too")
	return cmd
}

func (n *policyNoun) delete() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "delete ID --reason TEXT",
		Short: "Delete one: it holds nothing from the next commit on every replica, and stays with its history (approver)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return cli.UsageError("--reason is required: say why")
			}
			c, err := n.f.core()
			if err != nil {
				return err
			}
			r, err := c.DeletePolicy(cmd.Context(), n.kind, args[0], reason)
			if err != nil {
				return apiError(c, err)
			}
			return n.print(cmd, r, "Deleted")
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	return cmd
}

func (n *policyNoun) history() *cobra.Command {
	return &cobra.Command{
		Use:   "history ID",
		Short: "Every change of one, oldest first: who, when, why and what it said",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := n.f.core()
			if err != nil {
				return err
			}
			hs, err := c.PolicyHistory(cmd.Context(), n.kind, args[0])
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.PolicyHistory{Changes: hs}, append(append([]string{"VERSION", "OP"}, n.header...), "SOURCE", "BY",
				"WHEN", "WHY")...)
			for _, h := range hs {
				cells := []string{strconv.Itoa(h.Version), h.Op}
				for _, s := range n.cells(h.Spec) {
					cells = append(cells, textsafe.Escape(s))
				}
				cells = append(cells, textsafe.Escape(h.Source), textsafe.Escape(h.Actor), h.TS.Local().Format(time.RFC3339),
					textsafe.Escape(h.Reason))
				l.add(strconv.Itoa(h.Version), h, cells...)
			}
			return n.f.printList(cmd.OutOrStdout(), l)
		},
	}
}

// put makes or changes one record with spec.
func (n *policyNoun) put(cmd *cobra.Command, id string, spec any, reason, verb string) error {
	if reason == "" {
		return cli.UsageError("--reason is required: say why")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	c, err := n.f.core()
	if err != nil {
		return err
	}
	r, err := c.PutPolicy(cmd.Context(), n.kind, id, wire.PutPolicyRequest{Spec: b, Reason: reason})
	if err != nil {
		return apiError(c, err)
	}
	return n.print(cmd, r, verb)
}

// newWindowCmd is `muster window`.
func newWindowCmd() *cobra.Command {
	n := newPolicyNoun(wire.KindWindow, "window", "Maintenance windows kept in the store: make, list, delete one, its history",
		[]string{"CLUSTER", "CRON", "DURATION", "TIMEZONE"}, func(raw json.RawMessage) []string {
			var w wire.WindowSpec
			_ = json.Unmarshal(raw, &w)
			tz := w.Timezone
			if tz == "" {
				tz = "UTC"
			}
			return []string{w.Cluster, w.Cron, w.Duration, tz}
		})
	var name, cron, tz, reason string
	var dur time.Duration
	create := &cobra.Command{
		Use:     "create CLUSTER --cron EXPR --duration D [--timezone TZ] [--name NAME] --reason TEXT",
		Short:   "Make (or, with the --name of one, change) a window: disruptive work goes to the cluster only inside its windows (a first window: operator; another: approver)",
		Example: `  muster window create prod --name prod-nightly --cron "0 2 * * *" --duration 4h --timezone Europe/Berlin --reason "change board 12"`,
		Args:    exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cron == "" || dur <= 0 {
				return cli.UsageError("--cron and --duration are required")
			}
			id := name
			if id == "" {
				id = args[0] + "-" + strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
			}
			verb := "Made"
			if name != "" {
				verb = "Stored"
			}
			return n.put(cmd, id, wire.WindowSpec{Cluster: args[0], Cron: cron, Duration: dur.String(), Timezone: tz}, reason, verb)
		},
	}
	create.Flags().StringVar(&name, "name", "", "the window's name (default: the cluster's id and a suffix)")
	create.Flags().StringVar(&cron, "cron", "", "when it opens: a cron expression (5 fields) or @daily and the like")
	create.Flags().DurationVar(&dur, "duration", 0, "how long it stays open (1m to 168h)")
	create.Flags().StringVar(&tz, "timezone", "", "the cron's time zone (default UTC)")
	create.Flags().StringVar(&reason, "reason", "", "why (required)")
	n.cmd.AddCommand(create)
	return n.cmd
}

// newBudgetCmd is `muster budget`.
func newBudgetCmd() *cobra.Command {
	n := newPolicyNoun(wire.KindBudget, "budget", "Disruption budgets kept in the store: set, list, delete one, its history",
		[]string{"CLUSTER", "MAX UNAVAILABLE"}, func(raw json.RawMessage) []string {
			var b wire.BudgetSpec
			_ = json.Unmarshal(raw, &b)
			return []string{b.Cluster, b.MaxUnavailable}
		})
	var maxUnav, reason string
	set := &cobra.Command{
		Use:     "set CLUSTER --max-unavailable N|P% --reason TEXT",
		Short:   "Set a cluster's budget (a narrower one: operator; a wider one: approver, as lifting a freeze)",
		Example: `  muster budget set prod --max-unavailable 2 --reason "more replicas since 4711"`,
		Args:    exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxUnav == "" {
				return cli.UsageError("--max-unavailable is required: a count or a percentage like 10%%")
			}
			return n.put(cmd, args[0], wire.BudgetSpec{Cluster: args[0], MaxUnavailable: maxUnav}, reason, "Set")
		},
	}
	set.Flags().StringVar(&maxUnav, "max-unavailable", "", "how many nodes may be unavailable at once: a count or a percentage")
	set.Flags().StringVar(&reason, "reason", "", "why (required)")
	show := &cobra.Command{
		Use:   "show CLUSTER",
		Short: "Show a cluster's budget record, with who set it and why",
		Args:  exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := n.f.core()
			if err != nil {
				return err
			}
			rs, err := c.Policies(cmd.Context(), wire.KindBudget, args[0], false)
			if err != nil {
				return apiError(c, err)
			}
			if len(rs) == 0 {
				if n.f.json() {
					return n.f.write(cmd.OutOrStdout(), wire.PolicyRecordList{Policies: rs})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s has no budget.\n", textsafe.Escape(args[0]))
				return nil
			}
			r := rs[0]
			if n.f.json() {
				return n.f.write(cmd.OutOrStdout(), r)
			}
			src := r.Source
			if src == "" {
				src = "api"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Budget of %s: max_unavailable %s (version %d, set by %s at %s from %s: %s)\n",
				textsafe.Escape(args[0]), textsafe.Escape(n.cells(r.Spec)[1]), r.Version, textsafe.Escape(r.UpdatedBy),
				r.UpdatedTS.Local().Format(time.RFC3339), textsafe.Escape(src), textsafe.Escape(r.Reason))
			return nil
		},
	}
	n.cmd.AddCommand(set, show)
	return n.cmd
}

// newApprovalRuleCmd is `muster approval-rule`.
func newApprovalRuleCmd() *cobra.Command {
	n := newPolicyNoun(wire.KindApprovalRule, "approval-rule", "Approval rules kept in the store: make, list, delete one, its history (admin)",
		[]string{"POSITION", "KIND", "CLUSTER", "APPROVAL", "LEVELS"}, func(raw json.RawMessage) []string {
			var r wire.ApprovalRuleSpec
			_ = json.Unmarshal(raw, &r)
			var levels []string
			for _, l := range r.Levels {
				levels = append(levels, formatLevel(l))
			}
			return []string{strconv.Itoa(r.Position), orStar(r.Kind), orStar(r.Cluster), r.Approval, strings.Join(levels, " AND ")}
		})
	var kind, cluster, appr, reason string
	var levels []string
	var pos int
	create := &cobra.Command{
		Use:   "create NAME [--kind GLOB] [--cluster GLOB] (--approval required|none | --level SPEC...) [--position N] --reason TEXT",
		Short: "Make or change a rule: rules match work by position, the first decides (admin on every cluster)",
		Example: `  muster approval-rule create debug-free --kind "muster.io/debug.*" --approval none --reason "debug kinds change nothing"
  muster approval-rule create prod-db --cluster "prod-db-*" --level teams=db --level teams=sre,min=1 --reason "two teams on prod-db"`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := wire.ApprovalRuleSpec{Position: pos, Kind: kind, Cluster: cluster, Approval: appr}
			for _, s := range levels {
				l, err := parseLevel(s)
				if err != nil {
					return err
				}
				spec.Levels = append(spec.Levels, l)
			}
			return n.put(cmd, args[0], spec, reason, "Stored")
		},
	}
	create.Flags().StringVar(&kind, "kind", "", "the kinds it matches (a glob; default every kind)")
	create.Flags().StringVar(&cluster, "cluster", "", "the clusters it matches (a glob; default every cluster)")
	create.Flags().StringVar(&appr, "approval", "", "required or none (levels imply required)")
	create.Flags().StringArrayVar(&levels, "level", nil, "a level, all of them required: teams=a;b,persons=x;y,min=N (repeat for each level)")
	create.Flags().IntVar(&pos, "position", 0, "its place among the rules (lower first; ties by name)")
	create.Flags().StringVar(&reason, "reason", "", "why (required)")
	n.cmd.AddCommand(create)
	return n.cmd
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func formatLevel(l wire.RuleLevel) string {
	var parts []string
	if len(l.Teams) > 0 {
		parts = append(parts, "teams="+strings.Join(l.Teams, ";"))
	}
	if len(l.Persons) > 0 {
		parts = append(parts, "persons="+strings.Join(l.Persons, ";"))
	}
	if l.Min > 0 {
		parts = append(parts, "min="+strconv.Itoa(l.Min))
	}
	if len(parts) == 0 {
		return "any approver"
	}
	return strings.Join(parts, ",")
}

// parseLevel reads --level teams=a;b,persons=x,min=2.
func parseLevel(s string) (wire.RuleLevel, error) {
	var l wire.RuleLevel
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return l, cli.UsageError("--level %q: want teams=a;b,persons=x,min=N", s)
		}
		switch k {
		case "teams":
			l.Teams = append(l.Teams, strings.Split(v, ";")...)
		case "persons":
			l.Persons = append(l.Persons, strings.Split(v, ";")...)
		case "min":
			n, err := strconv.Atoi(v)
			if err != nil {
				return l, cli.UsageError("--level %q: min %q is not a number", s, v)
			}
			l.Min = n
		default:
			return l, cli.UsageError("--level %q: unknown key %q (teams, persons, min)", s, k)
		}
	}
	return l, nil
}
