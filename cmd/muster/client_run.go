package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one approved operation across many nodes, in waves",
		Long: `Run one approved operation across many nodes of a cluster, in waves bounded by
max_concurrency and stopped by max_errors. A RUN argument is a run id or a unique
prefix of it of at least 8 characters.`,
	}
	f := bindClientFlags(cmd)
	cmd.AddCommand(
		newRunCreateCmd(f),
		newRunListCmd(f),
		newRunShowCmd(f),
		newRunNodesCmd(f),
		newRunVerbCmd(f, "approve", "Approve a run waiting for approval (approver role)"),
		newRunVerbCmd(f, "reject", "Reject a run waiting for approval (approver role)"),
		newRunVerbCmd(f, "urgent", "Let a run's children pass the cluster's closed maintenance window, never a freeze (approver role, --reason required)"),
		newRunVerbCmd(f, "pause", "Stop a run from starting more children; those running finish"),
		newRunVerbCmd(f, "resume", "Let a paused run go on (errors that paused it are forgiven)"),
		newRunVerbCmd(f, "cancel", "Cancel a run: its unfinished children are cancelled and no more start"),
		newRunVerbCmd(f, "promote", "Let a run paused after its canary go on (an approver other than the requester)"),
		newRunVerbCmd(f, "abort", "Stop a paused run or a canary and roll back the nodes it started; it ends ABORTED (an approver, or the requester)"),
		newRunVerbCmd(f, "retry", "Make a new run, waiting for approval, over the nodes a finished run did not carry through"),
		newRunWatchCmd(f),
	)
	return cmd
}

// parseTarget reads --target: "all", "node=a,b" or "k=v,k2=v2" (labels).
func parseTarget(s string) (wire.Target, error) {
	switch {
	case s == "":
		return wire.Target{}, cli.UsageError("--target is required: all, node=N1,N2 or a label selector like role=replica")
	case s == "all":
		return wire.Target{All: true}, nil
	case strings.HasPrefix(s, "node="):
		nodes := splitComma(strings.TrimPrefix(s, "node="))
		if len(nodes) == 0 {
			return wire.Target{}, cli.UsageError("--target node=: name at least one node")
		}
		return wire.Target{Nodes: nodes}, nil
	}
	labels := map[string]string{}
	for _, p := range splitComma(s) {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return wire.Target{}, cli.UsageError("--target %q: want all, node=N1,N2 or k=v[,k=v]", s)
		}
		labels[k] = v
	}
	return wire.Target{Labels: labels}, nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newRunCreateCmd(f *clientFlags) *cobra.Command {
	var st wire.StageSpec
	var cluster, target, rawArgs, conc, errs string
	var pairs []string
	var timeout time.Duration
	var notBefore, lock string
	cmd := &cobra.Command{
		Use:   "create --cluster C --kind K --target T [flags]",
		Short: "Create a one-stage run",
		Example: `  muster run create --cluster prod --kind example.com/svc.restart --target role=replica --max-concurrency 2 --max-errors 10%
  muster run create --cluster prod --kind muster.io/debug.sleep --arg seconds=5 --target all --max-concurrency 25%`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster == "" || st.Kind == "" {
				return cli.UsageError("--cluster and --kind are required (see 'muster run create --help')")
			}
			var err error
			if st.Target, err = parseTarget(target); err != nil {
				return err
			}
			for name, v := range map[string]struct {
				s   string
				dst **limit.Limit
			}{"max-concurrency": {conc, &st.MaxConcurrency}, "max-errors": {errs, &st.MaxErrors}} {
				if v.s == "" {
					continue
				}
				l, err := limit.Parse(v.s)
				if err != nil {
					return cli.UsageError("--%s: %v", name, err)
				}
				*v.dst = &l
			}
			if timeout < 0 || timeout%time.Second != 0 {
				return cli.UsageError("--timeout %s: want a whole number of seconds, like 90s or 2h", timeout)
			}
			st.TimeoutS = int(timeout / time.Second)
			if st.Args, err = parseArgs(rawArgs, pairs); err != nil {
				return err
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			nb, err := parseNotBefore(notBefore, time.Now())
			if err != nil {
				return err
			}
			req := &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{st}, NotBefore: nb}
			if lock != "" {
				name, scope, _ := strings.Cut(lock, ":")
				req.Lock = &wire.Lock{Name: name, Scope: scope}
			}
			r, err := c.CreateRun(cmd.Context(), req)
			if err != nil {
				return argHint(apiError(c, err), pairs)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), r)
			}
			w := cmd.OutOrStdout()
			n := 0
			for _, s := range r.Stages {
				n += s.Size()
			}
			fmt.Fprintf(w, "Created run %s (%s): %s on %s.\n", textsafe.Escape(r.ID), textsafe.Escape(r.State), textsafe.Escape(st.Kind), words.Count(n, "node"))
			if r.State == "PENDING_APPROVE" {
				fmt.Fprintf(w, "It waits for approval: muster run approve %s\n", textsafe.Escape(shortID(r.ID)))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cluster, "cluster", "", "cluster to run on (required)")
	fl.StringVar(&st.Kind, "kind", "", "action kind (required)")
	fl.StringVar(&st.Name, "name", "main", "stage name")
	fl.StringVar(&target, "target", "", "all, node=N1,N2, or a label selector like role=replica,zone=eu-1 (required)")
	fl.StringArrayVar(&pairs, "arg", nil, "an argument key=value (repeatable; the value is JSON when valid, else a string)")
	fl.StringVar(&rawArgs, "args", "", "all arguments as a JSON object (--arg values override its keys)")
	fl.StringVar(&conc, "max-concurrency", "", "nodes with an unfinished child at once: a count or a percentage (default 1)")
	fl.StringVar(&errs, "max-errors", "", "failed children tolerated before the run stops: a count or a percentage (default 0)")
	fl.StringVar(&st.OnFailure, "on-failure", "", "abort (default: the run ends FAILED), pause or continue")
	fl.DurationVar(&timeout, "timeout", 0, "each child's time limit (default: the agent's)")
	fl.StringVar(&notBefore, "not-before", "", "push no child earlier: an RFC 3339 time, or a local time like 02:00 (the next one)")
	fl.StringVar(&lock, "lock", "", "a lock the run takes from start to end: NAME (per cluster) or NAME:global; a run taking it meanwhile waits")
	return cmd
}

func newRunListCmd(f *clientFlags) *cobra.Command {
	var flt client.RunFilter
	var watch watchFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Example: `  muster run list --cluster prod --state RUNNING,PAUSED
  muster run list -o wide -w`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			for i, s := range flt.States {
				flt.States[i] = strings.ToUpper(s)
			}
			return watch.list(cmd.Context(), cmd.OutOrStdout(), f, func(ctx context.Context) (*listing, error) {
				list, err := c.Runs(ctx, flt)
				if err != nil {
					return nil, apiError(c, err)
				}
				return runListing(list), nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&flt.Cluster, "cluster", "", "only this cluster")
	fl.StringSliceVar(&flt.States, "state", nil, "only these states (comma list)")
	fl.IntVar(&flt.Limit, "limit", 0, "runs per page (default 50, at most 200)")
	fl.StringVar(&flt.Marker, "marker", "", "start after this run id")
	watch.bind(cmd)
	return cmd
}

// runListing is a page of runs as run list prints it: -o wide adds the
// playbook and its version, the nodes failed, the schedule that made the
// run and its not-before.
func runListing(list *wire.RunList) *listing {
	l := &listing{records: list,
		header: []string{"ID", "CLUSTER", "STATE", "STAGES", "PROGRESS", "REQUESTER", "CREATED"},
		wide: []string{"ID", "CLUSTER", "STATE", "STAGES", "PROGRESS", "REQUESTER", "CREATED",
			"PLAYBOOK", "FAILED", "SCHEDULE", "NOT BEFORE"}}
	for _, r := range list.Runs {
		done, total := progress(&r)
		var p wire.NodeProgress
		for i := range r.Stages {
			p.Add(stageProgress(&r.Stages[i]))
		}
		pb := ""
		if r.Playbook != "" {
			pb = fmt.Sprintf("%s v%d", r.Playbook, r.PlaybookVersion)
		}
		cells := []string{shortID(r.ID), r.ClusterID, r.State, fmt.Sprint(len(r.Stages)), fmt.Sprintf("%d/%d", done, total),
			r.Requester, ts(r.CreatedTS)}
		l.rows = append(l.rows, listRow{key: r.ID, record: r, cells: cells,
			wide: append(slices.Clone(cells), pb, strconv.Itoa(p.Failed), r.ScheduleID, tsPtr(r.NotBefore))})
	}
	return l
}

// progress is a run's nodes finished (done, failed, skipped or rolled
// back) and all its nodes, every stage's summed: counted in nodes, never in
// attempts or steps.
func progress(r *wire.Run) (finished, total int) {
	var p wire.NodeProgress
	for i := range r.Stages {
		p.Add(stageProgress(&r.Stages[i]))
	}
	return p.Finished(), p.Total
}

// stageProgress is where a stage's nodes stand (its Total, from a core that
// does not send it, is the stage's size).
func stageProgress(st *wire.Stage) wire.NodeProgress {
	p := st.Progress
	if p.Total == 0 {
		p.Total, p.Waiting = st.Size(), max(st.Size()-p.Finished()-p.InFlight, 0)
	}
	return p
}

// childActions is how many child actions a run makes at least: a child per
// node and step (retries and rollbacks add more).
func childActions(r *wire.Run) int {
	n := 0
	for i := range r.Stages {
		n += r.Stages[i].Size() * max(len(r.Stages[i].Steps), 1)
	}
	return n
}

func newRunShowCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its stages, their counts and the per-node grid",
		Args:  exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			r, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), r)
			}
			return printRun(cmd.OutOrStdout(), r)
		},
	}
}

func printRun(w io.Writer, r *wire.Run) error {
	t := newTable(w, "ID", r.ID)
	state := r.State
	if r.StateReason != "" {
		state += " (" + r.StateReason + ")"
	}
	pb := ""
	if r.Playbook != "" {
		pb = fmt.Sprintf("%s v%d", r.Playbook, r.PlaybookVersion)
	}
	for _, kv := range [][2]string{{"Cluster", r.ClusterID}, {"State", state}, {"Requester", r.Requester},
		{"Approved by", r.ApprovedBy}, {"Playbook", pb}, {"Schedule", r.ScheduleID}, {"Digest", r.Digest}, {"Created", ts(r.CreatedTS)},
		{"Not before", tsPtr(r.NotBefore)}, {"Urgent", r.Urgent}, {"Finished", tsPtr(r.FinishedTS)}} {
		t.row(kv[0], textsafe.Escape(kv[1]))
	}
	if r.Lock != nil {
		t.row("Lock", lockText(r.Lock))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nStages:")
	s := newTable(w, "STAGE", "KIND", "STATE", "NODES", "CONCURRENCY", "MAX ERRORS", "ON FAILURE", "DEPENDS ON", "ARGS")
	for _, st := range r.Stages {
		kind, args := stageKind(&st)
		s.row(textsafe.Escape(st.Name), kind, st.State, fmt.Sprint(st.Size()), st.MaxConcurrency.String(),
			st.MaxErrors.String(), st.OnFailure, textsafe.Escape(strings.Join(st.DependsOn, ",")), args)
	}
	if err := s.flush(); err != nil {
		return err
	}
	if r.State == "PAUSED" {
		fmt.Fprintln(w, "\n"+pausedText(r, false))
	}
	printLevels(w, r.Approval)
	fmt.Fprintln(w)
	for _, st := range r.Stages {
		fmt.Fprintln(w, stageLine(&st))
		if len(st.Steps) > 0 {
			fmt.Fprintf(w, "%-12s steps: %s\n", "", stepsText(&st))
		}
		printStageLocks(w, &st)
		printStageMembers(w, &st)
	}
	printReuse(w, r)
	if err := printCoreSteps(w, r); err != nil {
		return err
	}
	if r.Summary != nil {
		for _, kv := range []struct {
			what  string
			nodes []wire.StageNode
		}{{"Failed", r.Summary.Failed}, {"Skipped", r.Summary.Skipped}} {
			if len(kv.nodes) == 0 {
				continue
			}
			var names []string
			for _, n := range kv.nodes {
				name := n.Stage + "/" + n.NodeID
				if n.Reason != "" {
					name += " (" + n.Reason + ")"
				}
				names = append(names, textsafe.Escape(name))
			}
			fmt.Fprintf(w, "%s: %s\n", kv.what, strings.Join(names, ", "))
		}
		for _, n := range r.Summary.Failed {
			if n.Output != "" {
				fmt.Fprintf(w, "  %s/%s, its last output:\n%s", textsafe.Escape(n.Stage), textsafe.Escape(n.NodeID), outputLines(n.Output, "    "))
			}
		}
	}
	if r.NodesPaged {
		// A large run: the core sent the cells in flight alone.
		fmt.Fprintf(w, "\n%s in flight shown; `muster run nodes %s` lists every node.\n", words.Count(len(r.Children), "node"), shortID(r.ID))
	}
	if len(r.Children) > 0 {
		if r.NodesPaged {
			fmt.Fprintln(w, "\nNodes in flight:")
		} else {
			fmt.Fprintln(w, "\nNodes:")
		}
		if err := printCells(w, r, r.Children); err != nil {
			return err
		}
		var steps bool
		for _, ch := range r.Children {
			steps = steps || len(ch.Steps) > 0
		}
		if steps {
			fmt.Fprintln(w, "\nSteps:")
			g := newTable(w, "STAGE", "NODE", "STEP", "ATTEMPT", "STATE", "ACTION", "ARGS", "REASON")
			for _, ch := range r.Children {
				for _, sc := range ch.Steps {
					g.row(textsafe.Escape(ch.Stage), textsafe.Escape(ch.NodeID), textsafe.Escape(sc.Step),
						fmt.Sprint(sc.Attempt), string(sc.State), shortID(sc.ActionID), textsafe.Escape(string(sc.Args)),
						textsafe.Escape(sc.Reason))
				}
			}
			return g.flush()
		}
	}
	return nil
}

// stageNodesText lists a stage's nodes as the core sent them, saying how
// many more it has when the list is cut (a run of more than 100 nodes).
func stageNodesText(st *wire.Stage) string {
	out := textsafe.Escape(strings.Join(st.Nodes, ","))
	if more := st.Size() - len(st.Nodes); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// printCells prints grid cells of run r, a row each.
func printCells(w io.Writer, r *wire.Run, cells []wire.RunChild) error {
	g := newTable(w, "STAGE", "WAVE", "NODE", "STATE", "ACTION")
	for _, ch := range cells {
		g.row(textsafe.Escape(ch.Stage), fmt.Sprint(ch.Wave), textsafe.Escape(ch.NodeID), nodeState(r, ch), shortID(ch.ActionID))
	}
	return g.flush()
}

func newRunNodesCmd(f *clientFlags) *cobra.Command {
	var marker string
	var limit int
	cmd := &cobra.Command{
		Use:   "nodes RUN",
		Short: "List a page of a run's nodes with their state in each stage, by node name",
		Args:  exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			r, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			page, err := c.RunNodes(cmd.Context(), r.ID, marker, limit)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), page)
			}
			w := cmd.OutOrStdout()
			if err := printCells(w, r, page.Children); err != nil {
				return err
			}
			if page.NextMarker != "" {
				_, err = fmt.Fprintf(w, "\nMore: muster run nodes %s --marker %s\n", shortID(r.ID), textsafe.Escape(page.NextMarker))
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&marker, "marker", "", "start after this node")
	fl.IntVar(&limit, "limit", 0, "nodes per page (default 100, at most 1000)")
	return cmd
}

// stageLine is a stage's progress in nodes: a bar of its nodes finished,
// and how many are done, in flight, failed, skipped, rolled back and
// waiting (attempts and rollback steps are its nodes' own, never added).
func stageLine(st *wire.Stage) string {
	p := stageProgress(st)
	const width = 20
	fill := 0
	if p.Total > 0 {
		fill = min(p.Finished()*width/p.Total, width)
	}
	var counts []string
	for _, c := range p.Counts() {
		counts = append(counts, fmt.Sprintf("%s %d", c.What, c.N))
	}
	return fmt.Sprintf("%-12s [%s%s] %d/%d  %s  %s", textsafe.Escape(st.Name), strings.Repeat("#", fill),
		strings.Repeat(".", width-fill), p.Finished(), p.Total, textsafe.Escape(st.State), strings.Join(counts, "  "))
}

func newRunVerbCmd(f *clientFlags, verb, short string) *cobra.Command {
	var reason, from string
	var rollback bool
	cmd := &cobra.Command{
		Use:   verb + " RUN",
		Short: short,
		Args:  exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			var r *wire.Run
			if verb == "approve" {
				// Approve what is shown: the run as read now, by its digest.
				shown, err := c.Run(cmd.Context(), args[0])
				if err != nil {
					return apiError(c, err)
				}
				if !f.json() {
					printApproval(cmd.OutOrStdout(), shown)
				}
				r, err = c.ApproveRun(cmd.Context(), shown.ID, shown.Digest)
				if err != nil {
					return apiError(c, err)
				}
			} else {
				var err error
				if verb == "urgent" && strings.TrimSpace(reason) == "" {
					return cli.UsageError("--reason is required: say why it may not wait for the window")
				}
				if verb == "promote" && strings.TrimSpace(reason) == "" {
					return cli.UsageError("--reason is required: say why the canary may go on (the run records it)")
				}
				switch {
				case verb == "cancel" && rollback:
					r, err = c.CancelRun(cmd.Context(), args[0], reason, true)
				case verb == "retry" && from != "":
					if from != wire.RetryFromFailed {
						return cli.UsageError("--from is %q or absent (from the first step), not %q",
							wire.RetryFromFailed, textsafe.Escape(from))
					}
					r, err = c.RetryRun(cmd.Context(), args[0], from)
				default:
					r, err = c.RunVerb(cmd.Context(), args[0], verb, reason)
				}
				if err != nil {
					return apiError(c, err)
				}
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), r)
			}
			if verb == "retry" {
				fmt.Fprintf(cmd.OutOrStdout(), "Run %s retries run %s over %d node(s) (%s).\n", textsafe.Escape(r.ID),
					textsafe.Escape(r.RetryOf), runNodes(r), textsafe.Escape(r.State))
				printReuse(cmd.OutOrStdout(), r)
				return nil
			}
			past := map[string]string{"approve": "Approved", "reject": "Rejected", "pause": "Paused",
				"resume": "Resumed", "cancel": "Cancelled", "promote": "Promoted", "urgent": "Marked urgent", "abort": "Aborted"}[verb]
			if (verb == "approve" || verb == "resume" || verb == "promote") && r.Approval != nil && !r.Approval.Satisfied {
				fmt.Fprintf(cmd.OutOrStdout(), "Recorded the approval of run %s (%s): %s.\n", textsafe.Escape(r.ID),
					textsafe.Escape(r.State), textsafe.Escape(r.Approval.Missing))
				return nil
			}
			if r.Aborting {
				fmt.Fprintf(cmd.OutOrStdout(), "%s run %s: the nodes it started roll back, then it ends ABORTED (`muster run watch %s`).\n",
					past, textsafe.Escape(r.ID), shortID(r.ID))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s run %s (%s).\n", past, textsafe.Escape(r.ID), textsafe.Escape(r.State))
			return nil
		},
	}
	switch verb {
	case "reject", "cancel", "urgent", "abort":
		cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the run's state and its event")
	case "promote":
		cmd.Flags().StringVar(&reason, "reason", "", "why the canary may go on (required; the run records it)")
	case "resume":
		cmd.Flags().StringVar(&reason, "reason", "", "why its errors may be forgiven (required to resume past errors; the run records it)")
	}
	if verb == "retry" {
		cmd.Flags().StringVar(&from, "from", "",
			`"failed": each failed node starts at its failed step, its DONE steps and their outputs reused (default: from the first step)`)
	}
	if verb == "cancel" {
		cmd.Flags().BoolVar(&rollback, "rollback", false,
			"roll back the nodes the run started, as an abort does (their rollback steps run); the run ends ABORTED")
	}
	return cmd
}

// printApproval shows what an approval covers: each stage's kind and args
// on its nodes, or, for a stage of steps, the steps each node goes through.
func printApproval(w io.Writer, r *wire.Run) {
	total := childActions(r)
	fmt.Fprintf(w, "Run %s on %s by %s: %s, %s, digest %.12s%s\n",
		r.ID, textsafe.Escape(r.ClusterID), textsafe.Escape(r.Requester), words.Count(len(r.Stages), "stage"),
		words.Count(total, "child action"), r.Digest,
		notBeforeText(r.NotBefore))
	for _, st := range r.Stages {
		kind, args := stageKind(&st)
		what := kind
		if args != "" {
			what += " " + args
		}
		fmt.Fprintf(w, "  %s: %s on %s (max_concurrency %s, max_errors %s)\n",
			textsafe.Escape(st.Name), what, stageNodesText(&st), st.MaxConcurrency, st.MaxErrors)
		if len(st.Steps) > 0 {
			fmt.Fprintf(w, "    each node, one after another: %s\n", stepsText(&st))
		}
	}
}

// stageKind is a stage's kind and args, escaped, for a person: a stage of
// steps has neither (its steps carry them) and says how many steps it has.
func stageKind(st *wire.Stage) (kind, args string) {
	if len(st.Steps) > 0 {
		return fmt.Sprintf("%d steps", len(st.Steps)), ""
	}
	if a := strings.TrimSpace(string(st.Args)); a != "" && a != "null" {
		args = textsafe.Escape(a)
	}
	return textsafe.Escape(st.Kind), args
}

// runNodes counts the nodes of a run's stages.
func runNodes(r *wire.Run) int {
	n := 0
	for i := range r.Stages {
		n += r.Stages[i].Size()
	}
	return n
}

// stepsText is a stage's procedure in order: "drain → upgrade (retry 3) →
// undrain [always]; rollback: downgrade".
func stepsText(st *wire.Stage) string {
	one := func(sp wire.StepSpec) string {
		s := sp.Name
		if sp.Retry != nil && sp.Retry.Attempts > 1 {
			s += fmt.Sprintf(" (%d attempts)", sp.Retry.Attempts)
		}
		switch sp.When {
		case "":
		case "always":
			s += " [always]"
		default:
			s += " [when " + sp.When + "]"
		}
		return s
	}
	var parts []string
	for _, sp := range st.Steps {
		parts = append(parts, one(sp))
	}
	out := strings.Join(parts, " → ")
	if len(st.Rollback) > 0 {
		parts = parts[:0]
		for _, sp := range st.Rollback {
			parts = append(parts, one(sp))
		}
		out += "; rollback: " + strings.Join(parts, " → ")
	}
	return textsafe.Escape(out)
}

// errRunNotDone is the exit of a watch whose run ended other than DONE.
var errRunNotDone = errors.New("run did not succeed")

// errRunPaused is the exit of a watch whose run is PAUSED (exit code 3),
// without --wait-resume.
var errRunPaused = errors.New("run is paused")

func newRunWatchCmd(f *clientFlags) *cobra.Command {
	var waitResume bool
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Show a run's progress per stage as it happens, until it is final or paused",
		Long: `Show a run's progress per stage (a bar and counts per state), and each node in
flight with its current step and attempt, as it happens, updated from the event
stream, until the run is final. The exit status is 0 when the run ends DONE and 1
otherwise.

When the run is (or becomes) PAUSED, watch says why and who may go on with it
(muster run resume ID, or muster run promote ID for a canary) and exits with
status 3; --wait-resume keeps watching through the pause instead.`,
		Args: exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			return watchRun(cmd.Context(), c, args[0], cmd.OutOrStdout(), f.json(), waitResume)
		},
	}
	cmd.Flags().BoolVar(&waitResume, "wait-resume", false, "keep watching a PAUSED run until it goes on and ends, instead of exiting with status 3")
	return cmd
}

// autoPromoting is the stage of a run paused after its canary whose rule
// auto_promote_after_s will promote it without anyone, or nil.
func autoPromoting(r *wire.Run) *wire.Stage {
	if r.State != "PAUSED" || r.PausedFor != wire.PausedCanary {
		return nil
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.Canary > 0 && !st.Promoted && st.AutoPromoteAfterS > 0 && (st.State == "PAUSED" || st.State == "RUNNING") {
			return st
		}
	}
	return nil
}

// pausedText says why run r is paused and who may go on with it, and how
// (with the watch's way to keep watching when watching).
func pausedText(r *wire.Run, watching bool) string {
	id := textsafe.Escape(r.ID)
	out := "Run " + id + " is PAUSED" + reasonText(r.StateReason) + ". "
	switch r.PausedFor {
	case wire.PausedCanary:
		if s := autoPromoting(r); s != nil {
			out += fmt.Sprintf("Its canary is through: it promotes itself once its gates have held %ds; an approver other than %s may promote it sooner with `muster run promote %s --reason WHY`.",
				s.AutoPromoteAfterS, textsafe.Escape(r.Requester), id)
			break
		}
		out += fmt.Sprintf("Its canary is through: an approver other than %s may promote it with `muster run promote %s --reason WHY`.",
			textsafe.Escape(r.Requester), id)
	case wire.PausedErrors:
		out += fmt.Sprintf("Its errors passed max_errors: an approver other than %s may resume it, forgiving them, with `muster run resume %s --reason WHY`.",
			textsafe.Escape(r.Requester), id)
	default:
		out += fmt.Sprintf("It was paused by hand: an operator may resume it with `muster run resume %s`.", id)
	}
	out += fmt.Sprintf(" An approver or %s may instead abort it, rolling back the nodes it started, with `muster run abort %s`.",
		textsafe.Escape(r.Requester), id)
	if watching {
		out += " (`muster run watch --wait-resume " + id + "` keeps watching.)"
	}
	return out
}

// watchRun shows the run's stage lines, and a line per node in flight,
// each time they change: redrawn in place on a terminal, as plain lines
// otherwise (see runView). Every event of the run or of one of its children
// (they carry its run_id) re-reads the run, at most a few times a second.
// A PAUSED run ends the watch (errRunPaused, after a line saying why and
// who may go on) unless waitResume.
func watchRun(ctx context.Context, c *client.Core, ref string, w io.Writer, asJSON, waitResume bool) error {
	r, err := c.Run(ctx, ref)
	if err != nil {
		return apiError(c, err)
	}
	id := r.ID
	view := newRunView(w)
	var last []string
	show := func(r *wire.Run) error {
		lines := runLines(r)
		if slices.Equal(lines, last) {
			return nil
		}
		last = lines
		if asJSON {
			r.Children = nil
			return writeJSON(w, r)
		}
		return view.show(lines)
	}
	since := int64(-1)
	toldAuto := false
	for attempt := 0; ; {
		s, err := c.Stream(ctx, since, client.EventFilter{RunID: id})
		if err != nil {
			return apiError(c, err)
		}
		err = func() error {
			defer s.Close()
			for {
				r, err := c.Run(ctx, id)
				if err != nil {
					return apiError(c, err)
				}
				if err := show(r); err != nil {
					return err
				}
				if r.State == "DONE" {
					return nil
				}
				if r.State == "FAILED" || r.State == "CANCELLED" || r.State == "PARTIAL" || r.State == "ABORTED" {
					return fmt.Errorf("%w: %s ended %s%s", errRunNotDone, textsafe.Escape(id), textsafe.Escape(r.State), reasonText(r.StateReason))
				}
				// A canary that promotes itself goes on without anyone: the
				// watch says so once and keeps watching.
				if r.State == "PAUSED" && !waitResume && autoPromoting(r) != nil && !toldAuto {
					toldAuto = true
					if !asJSON {
						if _, err := fmt.Fprintln(w, pausedText(r, false)); err != nil {
							return err
						}
					}
				}
				if r.State == "PAUSED" && !waitResume && autoPromoting(r) == nil {
					if !asJSON {
						if _, err := fmt.Fprintln(w, pausedText(r, true)); err != nil {
							return err
						}
					}
					return &cli.ExitError{Code: 3, Err: fmt.Errorf("%w: %s is PAUSED%s", errRunPaused, textsafe.Escape(id), reasonText(r.StateReason))}
				}
				if _, err := s.Next(); err != nil {
					since = s.LastID()
					return err
				}
				attempt = 0
				// Let a burst of events of one pass settle into one redraw.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		if !errors.Is(err, client.ErrStreamClosed) || ctx.Err() != nil {
			return err
		}
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

// runLines are what run watch shows: per stage its progress line and a
// line per node in flight (a child NEW or RUNNING, or waiting to be pushed)
// with, in a stage with steps, its current step and attempt, then the
// run's state.
func runLines(r *wire.Run) []string {
	var lines []string
	for _, st := range r.Stages {
		lines = append(lines, stageLine(&st))
		for _, ch := range r.Children {
			if ch.Stage != st.Name || ch.State.Final() || ch.State == "" || ch.State == action.PendingApprove {
				continue
			}
			step := ""
			if n := len(ch.Steps); n > 0 {
				cur := ch.Steps[n-1] // the newest child: the step under way
				step = fmt.Sprintf("  step %s attempt %d/%d", textsafe.Escape(cur.Step), cur.Attempt, stepAttempts(&st, cur.Step))
			}
			lines = append(lines, fmt.Sprintf("  %-20s %-16s wave %d%s  %s", textsafe.Escape(ch.NodeID), ch.State, ch.Wave,
				step, shortID(ch.ActionID)))
		}
	}
	if r.Summary != nil {
		// Why each failed node failed, its output's last line.
		for _, n := range r.Summary.Failed {
			line := fmt.Sprintf("  %-20s FAILED %s", n.NodeID, n.Reason)
			if n.Output != "" {
				line += ": " + n.Output[strings.LastIndexByte(n.Output, '\n')+1:]
			}
			lines = append(lines, textsafe.Escape(line))
		}
	}
	return append(lines, "run "+textsafe.Escape(shortID(r.ID))+": "+textsafe.Escape(r.State)+reasonText(r.StateReason))
}

// outputLines is a command's output, each line escaped and indented by
// indent, each ending in a newline.
func outputLines(out, indent string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		b.WriteString(indent + textsafe.Escape(l) + "\n")
	}
	return b.String()
}

// stepAttempts is how many attempts the step named name of stage st has
// (its retry's, 1 without one).
func stepAttempts(st *wire.Stage, name string) int {
	for _, sp := range append(slices.Clone(st.Steps), st.Rollback...) {
		if sp.Name == name && sp.Retry != nil && sp.Retry.Attempts > 1 {
			return sp.Retry.Attempts
		}
	}
	return 1
}

// runView shows successive states of a run.
type runView interface{ show(lines []string) error }

// newRunView redraws in place when w is a terminal, and prints plain lines
// otherwise (a file, a pipe, CI logs).
func newRunView(w io.Writer) runView {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		v := &liveView{w: w}
		v.width, v.height, _ = term.GetSize(int(f.Fd()))
		return v
	}
	return &plainView{w: w, now: time.Now}
}

// liveView redraws the lines it drew last: cursor up over them, each line
// cleared and written again, what is left below cleared. Lines are cut to
// the terminal's width and their number to its height (when known), so
// that the cursor can always go back over what it drew.
type liveView struct {
	w             io.Writer
	width, height int // 0: unknown
	drawn         int
}

func (v *liveView) show(lines []string) error {
	if v.height > 1 && len(lines) > v.height-1 {
		more := len(lines) - (v.height - 2)
		lines = append(slices.Clone(lines[:v.height-2]), fmt.Sprintf("… %d more lines", more))
	}
	if v.width > 1 {
		cut := make([]string, len(lines))
		for i, l := range lines {
			if r := []rune(l); len(r) > v.width-1 {
				l = string(r[:v.width-2]) + "…"
			}
			cut[i] = l
		}
		lines = cut
	}
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("\x1b[J")
	v.drawn = len(lines)
	_, err := io.WriteString(v.w, b.String())
	return err
}

// plainView prints, with the time, only the lines that changed since the
// last show: a log reads as a history, one line per change.
type plainView struct {
	w    io.Writer
	now  func() time.Time
	seen map[string]bool
}

func (v *plainView) show(lines []string) error {
	next := map[string]bool{}
	stamp := v.now().Format("15:04:05")
	for _, l := range lines {
		next[l] = true
		if v.seen[l] {
			continue
		}
		if _, err := fmt.Fprintf(v.w, "%s  %s\n", stamp, l); err != nil {
			return err
		}
	}
	v.seen = next
	return nil
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return " (" + textsafe.Escape(r) + ")"
}

// nodeState is how a run's node ended in its stage: FAILED or SKIPPED when
// the stage lists it so (a failed node's last child may be a DONE
// `when: always` step or rollback), else its last child's state.
func nodeState(r *wire.Run, ch wire.RunChild) string {
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.Name != ch.Stage {
			continue
		}
		if slices.Contains(st.Failed, ch.NodeID) {
			return "FAILED"
		}
		if slices.Contains(st.Skipped, ch.NodeID) {
			return "SKIPPED"
		}
	}
	if ch.State == "" {
		return "-"
	}
	return string(ch.State)
}

// printReuse shows, for a retry from the failed step, where each node
// starts and the steps it reuses.
func printReuse(w io.Writer, r *wire.Run) {
	for _, st := range r.Stages {
		for _, n := range st.Reuse {
			fmt.Fprintf(w, "  %s: node %s starts at %s (reuses %s)\n", textsafe.Escape(st.Name), textsafe.Escape(n.NodeID),
				textsafe.Escape(displayStepName(n.From)), textsafe.Escape(strings.Join(n.Steps, ", ")))
		}
	}
}

// displayStepName names a step; "" (a run whose every step is reused)
// is its end.
func displayStepName(s string) string {
	if s == "" {
		return "its end"
	}
	return s
}

// lockText shows a lock: "db" or "db (global)".
func lockText(l *wire.Lock) string {
	if l.Scope == wire.LockGlobal {
		return textsafe.Escape(l.Name) + " (global)"
	}
	return textsafe.Escape(l.Name)
}

// printStageMembers says whether stage st follows its labels, the nodes
// it took as they joined, and the nodes matching its target that are not
// in the run.
func printStageMembers(w io.Writer, st *wire.Stage) {
	if st.Follow {
		fmt.Fprintf(w, "%-12s follow: the nodes matching %s, and those that join while it runs\n", "",
			textsafe.Escape(labels.Set(st.Target.Labels).String()))
	}
	if len(st.Joined) > 0 {
		fmt.Fprintf(w, "%-12s joined: %s\n", "", textsafe.Escape(strings.Join(st.Joined, ", ")))
	}
	if len(st.NotInRun) > 0 {
		fmt.Fprintf(w, "%-12s not in this run: %s (match its target now, not among its nodes: joined later, or left out when it was planned)\n", "",
			textsafe.Escape(strings.Join(st.NotInRun, ", ")))
	}
}

// printStageLocks prints the locks stage st takes while it runs: its own,
// and those the kinds of its steps declare.
func printStageLocks(w io.Writer, st *wire.Stage) {
	if st.Lock != nil {
		fmt.Fprintf(w, "%-12s lock: %s (held while the stage runs)\n", "", lockText(st.Lock))
	}
	for _, k := range st.KindLocks {
		who := "kind " + textsafe.Escape(strings.Join(k.Kinds, ", ")) + " declares it"
		if len(k.Kinds) > 1 {
			who = "kinds " + textsafe.Escape(strings.Join(k.Kinds, ", ")) + " declare it"
		}
		fmt.Fprintf(w, "%-12s lock: %s (held while the stage runs: %s)\n", "", lockText(&wire.Lock{Name: k.Name, Scope: k.Scope}), who)
	}
}

// printCoreSteps lists the results of the gates and calls the core ran,
// with the value seen, when, and the verdict; and who promoted a canary.
func printCoreSteps(w io.Writer, r *wire.Run) error {
	some := false
	for _, st := range r.Stages {
		if st.PromotedBy != "" {
			fmt.Fprintf(w, "%s: %s\n", textsafe.Escape(st.Name), textsafe.Escape(st.PromotedBy))
		}
		some = some || len(st.CoreSteps) > 0
	}
	if !some {
		return nil
	}
	fmt.Fprintln(w, "\nGates and calls (run by the core):")
	t := newTable(w, "STAGE", "NODE", "STEP", "ATTEMPT", "STATE", "VALUE", "AT", "CHECKS", "VERDICT")
	for _, st := range r.Stages {
		for _, cs := range st.CoreSteps {
			t.row(textsafe.Escape(st.Name), textsafe.Escape(cs.Node), textsafe.Escape(cs.Step), fmt.Sprint(cs.Attempt),
				textsafe.Escape(cs.State), textsafe.Escape(cs.Value), tsPtr(cs.At), fmt.Sprint(cs.Checks), textsafe.Escape(cs.Reason))
		}
	}
	return t.flush()
}
