package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

func newPlaybookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playbook",
		Short: "Store, plan and start playbooks: versioned procedures over a cluster",
	}
	f := bindClientFlags(cmd)
	cmd.AddCommand(newPlaybookApplyCmd(f), newPlaybookListCmd(f), newPlaybookShowCmd(f),
		newPlaybookPlanCmd(f), newPlaybookStartCmd(f))
	return cmd
}

// readDoc reads a playbook file.
func readDoc(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cli.UsageError("%v", err)
	}
	return string(b), nil
}

func newPlaybookApplyCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "apply FILE",
		Short: "Store a playbook; a changed document becomes a new version, an unchanged one changes nothing",
		Args:  exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readDoc(args[0])
			if err != nil {
				return err
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			p, err := c.ApplyPlaybook(cmd.Context(), doc)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), p)
			}
			if p.Changed {
				fmt.Fprintf(cmd.OutOrStdout(), "Applied playbook %s version %d.\n", textsafe.Escape(p.Name), p.Version)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Playbook %s is unchanged (version %d).\n", textsafe.Escape(p.Name), p.Version)
			}
			return nil
		},
	}
}

func newPlaybookListCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List playbooks with their newest version",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			list, err := c.Playbooks(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(list, "NAME", "VERSION", "APPLIED BY", "APPLIED", "DESCRIPTION")
			for _, p := range list {
				l.add(p.Name, p, textsafe.Escape(p.Name), fmt.Sprint(p.Version), textsafe.Escape(p.CreatedBy), ts(p.CreatedTS), textsafe.Escape(p.Description))
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}
}

func newPlaybookShowCmd(f *clientFlags) *cobra.Command {
	var version int
	var diff string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a playbook's document (the newest version, or --version N), or the diff between two versions",
		Example: `  muster playbook show rolling-restart
  muster playbook show rolling-restart --version 2
  muster playbook show rolling-restart --diff 1..3`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if diff != "" {
				var a, b int
				if _, err := fmt.Sscanf(diff, "%d..%d", &a, &b); err != nil || a < 1 || b < 1 {
					return cli.UsageError("--diff %q: want two versions like 1..3", diff)
				}
				pa, err := c.Playbook(cmd.Context(), args[0], a)
				if err != nil {
					return apiError(c, err)
				}
				pb, err := c.Playbook(cmd.Context(), args[0], b)
				if err != nil {
					return apiError(c, err)
				}
				d := udiff.Unified(fmt.Sprintf("%s v%d", args[0], a), fmt.Sprintf("%s v%d", args[0], b), pa.Document, pb.Document)
				_, err = io.WriteString(w, cli.SafeLines(d))
				return err
			}
			p, err := c.Playbook(cmd.Context(), args[0], version)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(w, p)
			}
			from := ""
			if p.Source != "" {
				from = " from " + textsafe.Escape(p.Source)
			}
			fmt.Fprintf(w, "# %s version %d, applied by %s%s at %s\n", textsafe.Escape(p.Name), p.Version, textsafe.Escape(p.CreatedBy), from, ts(p.CreatedTS))
			var vs []string
			for _, v := range p.Versions {
				vs = append(vs, fmt.Sprint(v.Version))
			}
			fmt.Fprintf(w, "# versions: %s\n", strings.Join(vs, ", "))
			_, err = io.WriteString(w, cli.SafeLines(p.Document))
			return err
		},
	}
	cmd.Flags().IntVar(&version, "version", 0, "the version to show (default: the newest)")
	cmd.Flags().StringVar(&diff, "diff", "", "show the changes between two versions, like 1..3")
	return cmd
}

// planFlags are the flags plan and start share.
type planFlags struct {
	cluster string
	params  []string
	version int
	digest  string
	// notBefore is --not-before, limit --limit: both are in the plan's
	// digest, so a start repeats what its plan was given.
	notBefore string
	limit     string
}

func (p *planFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.cluster, "cluster", "", "the cluster to run on (required)")
	cmd.Flags().StringArrayVar(&p.params, "param", nil, "a parameter key=value (repeatable)")
	cmd.Flags().IntVar(&p.version, "version", 0, "the stored version (default: the newest)")
	cmd.Flags().StringVar(&p.notBefore, "not-before", "", "push no child earlier: an RFC 3339 time, or a local time like 02:00 (the next one)")
	cmd.Flags().StringVar(&p.limit, "limit", "", "only these nodes of each stage: node ids or globs, comma-separated (web-1,web-2 or 'web-*')")
}

func (p *planFlags) request(now time.Time) (*wire.PlanRequest, error) {
	if p.cluster == "" {
		return nil, cli.UsageError("--cluster is required")
	}
	params, err := parseParams(p.params)
	if err != nil {
		return nil, err
	}
	req := &wire.PlanRequest{ClusterID: p.cluster, Version: p.version, Digest: p.digest, Params: params}
	if req.NotBefore, err = parseNotBefore(p.notBefore, now); err != nil {
		return nil, err
	}
	if req.Limit, err = parseLimit(p.limit); err != nil {
		return nil, err
	}
	return req, nil
}

// parseLimit reads --limit: node ids or globs, comma-separated. The core
// checks each names a node of the cluster.
func parseLimit(s string) ([]string, error) {
	out, err := target.SplitLimit(s)
	if err != nil {
		return nil, cli.UsageError("--%v", err)
	}
	return out, nil
}

// parseParams reads repeated --param key=value flags.
func parseParams(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.UsageError("--param %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func newPlaybookPlanCmd(f *clientFlags) *cobra.Command {
	var pf planFlags
	cmd := &cobra.Command{
		Use:   "plan FILE|NAME --cluster C [--param k=v]... [--not-before T] [--limit NODES]",
		Short: "Print every child action starting the playbook would create, by stage and wave, creating nothing",
		Long: `Print every child action starting the playbook would create, by stage and wave,
on which node, with the resolved args, creating nothing. FILE plans a document
before it is applied; NAME plans a stored playbook. --not-before and --limit
plan the run that starts then, on those nodes: the digest printed covers both,
and is the one the run started with the same flags is approved under.`,
		Example: `  muster playbook plan configs/playbooks/backup-all.yaml --cluster prod --param mode=incremental
  muster playbook plan rolling-restart --cluster prod
  muster playbook plan rolling-restart --cluster prod --limit 'web-*' --not-before 02:00`,
		Args: exactArgs("FILE|NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := pf.request(time.Now())
			if err != nil {
				return err
			}
			name := args[0]
			if _, err := os.Stat(name); err == nil {
				if name, err = readNamedDoc(name, req); err != nil {
					return err
				}
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			p, err := c.PlanPlaybook(cmd.Context(), name, req)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), p)
			}
			return printPlan(cmd.OutOrStdout(), p, req.Params)
		},
	}
	pf.bind(cmd)
	return cmd
}

// readNamedDoc reads the playbook document of file into req and returns
// the name it gives.
func readNamedDoc(file string, req *wire.PlanRequest) (string, error) {
	var err error
	if req.Document, err = readDoc(file); err != nil {
		return "", err
	}
	var head struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal([]byte(req.Document), &head); err != nil || head.Name == "" {
		return "", cli.UsageError("%s: not a playbook with a name", file)
	}
	return head.Name, nil
}

// shellWord quotes s for a POSIX shell when it holds anything but letters,
// digits and -_./:=,@+.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printPlan prints plan p; given are the --param flags it was planned with,
// which the start line it ends with repeats.
func printPlan(w io.Writer, p *wire.Plan, given map[string]string) error {
	v := "unsaved document"
	if p.Version > 0 {
		v = fmt.Sprintf("version %d", p.Version)
	}
	fmt.Fprintf(w, "Playbook %s (%s) on cluster %s\n", textsafe.Escape(p.Playbook), v, textsafe.Escape(p.ClusterID))
	if p.NotBefore != nil {
		fmt.Fprintf(w, "Not before %s\n", ts(*p.NotBefore))
	}
	if len(p.Limit) > 0 {
		fmt.Fprintf(w, "Limited to %s\n", textsafe.Escape(strings.Join(p.Limit, ",")))
	}
	fmt.Fprintf(w, "Digest %s\n", textsafe.Escape(p.Digest))
	if p.Lock != nil {
		fmt.Fprintf(w, "Lock %s, held from the run's start to its end\n", lockText(p.Lock))
	}
	for _, st := range p.Stages {
		deps := "none"
		if len(st.DependsOn) > 0 {
			deps = strings.Join(st.DependsOn, ", ")
		}
		what := textsafe.Escape(st.Kind)
		if len(st.Steps) > 0 {
			what = words.Count(len(st.Steps), "step")
		}
		on := words.Count(len(st.Nodes), "node")
		if st.Follow {
			on = fmt.Sprintf("the nodes matching %s (%d now, and those that join while it runs)",
				textsafe.Escape(labels.Set(st.Target.Labels).String()), len(st.Nodes))
		}
		fmt.Fprintf(w, "\nStage %s: %s on %s, max_concurrency %s, max_errors %s, on_failure %s, after %s\n",
			textsafe.Escape(st.Name), what, on, st.MaxConcurrency, st.MaxErrors, textsafe.Escape(st.OnFailure), textsafe.Escape(deps))
		printStageLocks(w, &st)
		if len(st.Steps) == 0 {
			t := newTable(w, "WAVE", "NODE", "ARGS", "HELD")
			for _, ch := range p.Children {
				if ch.Stage == st.Name {
					t.row(fmt.Sprint(ch.Wave), textsafe.Escape(ch.NodeID), textsafe.Escape(string(ch.Args)), textsafe.Escape(ch.Held))
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			continue
		}
		printProcedure(w, &st)
		// Each node: its steps in order, then the rollback it would run
		// if it failed; the canary nodes, and the pause after them.
		t := newTable(w, "WAVE", "NODE", "STEP", "KIND", "ARGS", "NOTE", "HELD")
		for _, ch := range p.Children {
			if ch.Stage == st.Name {
				var note []string
				if ch.Rollback {
					note = append(note, "rollback, if the node fails")
				}
				if ch.Canary {
					note = append(note, "canary")
				}
				if ch.CanaryPause {
					note = append(note, canaryPauseText(p.Stages, ch.Stage))
				}
				if ch.When != "" {
					note = append(note, "when "+ch.When)
				}
				t.row(fmt.Sprint(ch.Wave), textsafe.Escape(ch.NodeID), textsafe.Escape(ch.Step), textsafe.Escape(ch.Kind),
					textsafe.Escape(string(ch.Args)), textsafe.Escape(strings.Join(note, "; ")), textsafe.Escape(ch.Held))
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	steps, rollback := 0, 0
	for _, ch := range p.Children {
		if ch.Rollback {
			rollback++
		} else {
			steps++
		}
	}
	if rollback > 0 {
		fmt.Fprintf(w, "\n%s, and %s made only on a node that fails; nothing was created.\n",
			words.Count(steps, "child action"), words.Count(rollback, "rollback step"))
	} else {
		fmt.Fprintf(w, "\n%s; nothing was created.\n", words.Count(steps, "child action"))
	}
	if p.Version > 0 {
		line := fmt.Sprintf("muster playbook start %s --cluster %s --digest %s", shellWord(p.Playbook), shellWord(p.ClusterID), shellWord(p.Digest))
		for _, k := range slices.Sorted(maps.Keys(given)) {
			line += " --param " + shellWord(k+"="+given[k])
		}
		if p.NotBefore != nil {
			line += " --not-before " + p.NotBefore.UTC().Format(time.RFC3339Nano)
		}
		if len(p.Limit) > 0 {
			line += " --limit " + shellWord(strings.Join(p.Limit, ","))
		}
		fmt.Fprintf(w, "To start exactly this plan: %s\n", textsafe.Escape(line))
	}
	return nil
}

// promoteText says how a stage's canary goes on once it is through: by
// itself once its gates have held auto_promote_after_s, or by an approver.
func promoteText(st *wire.Stage) string {
	if st.AutoPromoteAfterS > 0 {
		return fmt.Sprintf("it promotes itself once its gates have held %ds (an approver may promote it sooner)", st.AutoPromoteAfterS)
	}
	return "an approver promotes it"
}

// canaryPauseText is the plan's note on the last canary node of stage name.
func canaryPauseText(stages []wire.Stage, name string) string {
	for i := range stages {
		if stages[i].Name == name {
			return "then the run pauses: " + promoteText(&stages[i])
		}
	}
	return "then the run pauses until an approver promotes it"
}

// printProcedure shows a stage's steps, with their retry and when, its
// rollback, canary and soak.
func printProcedure(w io.Writer, st *wire.Stage) {
	line := func(what string, sp wire.StepSpec) {
		fmt.Fprintf(w, "  %s %s: %s", what, textsafe.Escape(sp.Name), textsafe.Escape(sp.Kind))
		if sp.Retry != nil {
			fmt.Fprintf(w, ", retry %d attempts", sp.Retry.Attempts)
		}
		if sp.When != "" {
			fmt.Fprintf(w, ", when %s", textsafe.Escape(sp.When))
		}
		fmt.Fprintln(w)
	}
	for _, sp := range st.Steps {
		line("step", sp)
	}
	for _, sp := range st.Rollback {
		line("rollback", sp)
	}
	if st.Canary > 0 {
		fmt.Fprintf(w, "  canary: the run pauses after %s; %s\n", words.Count(st.Canary, "node"), promoteText(st))
	}
	if st.SoakS > 0 {
		fmt.Fprintf(w, "  soak: %ds after each node's last step\n", st.SoakS)
	}
}

func newPlaybookStartCmd(f *clientFlags) *cobra.Command {
	var pf planFlags
	cmd := &cobra.Command{
		Use:   "start NAME|FILE --cluster C (--version N | --digest D) [--param k=v]... [--not-before T] [--limit NODES]",
		Short: "Create a run from a playbook's plan; it waits for approval like any run",
		Long: `Create a run from a stored playbook's plan. Give what the plan showed: --digest,
the plan's digest (the run is created only if its plan is still exactly that one),
or --version, which must still be the newest. If the playbook moved since the
plan, nothing is created: plan it again. Give the --param, --not-before and
--limit the plan was given: a digest planned for other nodes or another time is
refused. FILE starts a document that is not applied as an ad-hoc run, exactly as
'muster playbook plan FILE' showed it: --digest is then required.`,
		Example: `  muster playbook plan rolling-restart --cluster prod --param service=nginx
  muster playbook start rolling-restart --cluster prod --param service=nginx --digest 3f9c...
  muster playbook start rolling-restart --cluster prod --param service=nginx --version 4
  muster playbook start rolling-restart --cluster prod --limit 'web-*' --digest 3f9c...
  muster playbook start ./hotfix.yaml --cluster prod --digest 3f9c...`,
		Args: exactArgs("NAME|FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := pf.request(time.Now())
			if err != nil {
				return err
			}
			name := args[0]
			if _, err := os.Stat(name); err == nil {
				if name, err = readNamedDoc(name, req); err != nil {
					return err
				}
				if req.Digest == "" {
					return cli.UsageError("give --digest as muster playbook plan %s showed it: a document starts only as planned", args[0])
				}
			}
			if req.Version == 0 && req.Digest == "" {
				return cli.UsageError("give --digest (or --version) as muster playbook plan %s showed it: a start creates what was planned", args[0])
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			r, err := c.StartPlaybook(cmd.Context(), name, req)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), r)
			}
			if r.Playbook == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Started %s as ad-hoc run %s (%s).\n", textsafe.Escape(args[0]), textsafe.Escape(r.ID), textsafe.Escape(r.State))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Started playbook %s version %d as run %s (%s).\n", textsafe.Escape(r.Playbook),
					r.PlaybookVersion, textsafe.Escape(r.ID), textsafe.Escape(r.State))
			}
			if r.State == "PENDING_APPROVE" {
				fmt.Fprintf(cmd.OutOrStdout(), "It waits for approval: muster run approve %s\n", textsafe.Escape(shortID(r.ID)))
			}
			return nil
		},
	}
	pf.bind(cmd)
	cmd.Flags().StringVar(&pf.digest, "digest", "", "the digest muster playbook plan printed")
	return cmd
}
