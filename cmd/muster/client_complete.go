package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

// completionTimeout bounds how long a completion waits for the core: a
// shell waiting on <Tab> must not hang.
const completionTimeout = 2 * time.Second

// completer asks the core for the candidates of one argument or flag.
type completer func(ctx context.Context, c *client.Core, cmd *cobra.Command) ([]string, error)

// flagsOf rebuilds the connection flags of cmd as parsed for a completion.
func flagsOf(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{output: "table"}
	get := func(name string) string {
		v, _ := cmd.Flags().GetString(name)
		return v
	}
	f.addr, f.token = get("addr"), get("token")
	f.caCert, f.clientCert, f.clientKey = get("cacert"), get("client-cert"), get("client-key")
	return f
}

// ask turns a completer into a cobra completion function: it asks the core
// with a short timeout, keeps the candidates starting with what was typed,
// and completes nothing (and no file names) when the core does not answer.
func ask(fn completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := flagsOf(cmd).core()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		all, err := fn(ctx, c, cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return prefixed(all, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// fixed completes from a list known without the core.
func fixed(all ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return prefixed(all, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// prefixed keeps the candidates ("value" or "value\tdescription") whose
// value starts with typed; a comma list completes its last item.
func prefixed(all []string, typed string) []string {
	head, last := "", typed
	if i := strings.LastIndex(typed, ","); i >= 0 {
		head, last = typed[:i+1], typed[i+1:]
	}
	var out []string
	for _, a := range all {
		if strings.HasPrefix(a, last) {
			out = append(out, head+a)
		}
	}
	return out
}

// orFiles completes as fn does, and lets the shell offer file names as well:
// for an argument that is a stored name or a file.
func orFiles(fn cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		out, _ := fn(cmd, args, toComplete)
		return out, cobra.ShellCompDirectiveDefault
	}
}

// onlyFirst completes the first positional argument only.
func onlyFirst(fn cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(cmd, args, toComplete)
	}
}

func completeClusters(ctx context.Context, c *client.Core, _ *cobra.Command) ([]string, error) {
	cs, err := c.Clusters(ctx)
	var out []string
	for _, cl := range cs {
		out = append(out, cl.ID+"\t"+cl.Status)
	}
	return out, err
}

// completeNodes lists the nodes of --cluster, or of every cluster.
func completeNodes(ctx context.Context, c *client.Core, cmd *cobra.Command) ([]string, error) {
	cluster, _ := cmd.Flags().GetString("cluster")
	ns, err := c.Nodes(ctx, cluster)
	var out []string
	for _, n := range ns {
		if !slices.Contains(out, n.ID) {
			out = append(out, n.ID+"\t"+n.ClusterID+" "+n.Status)
		}
	}
	return out, err
}

// completeKinds lists the kinds the nodes announce.
func completeKinds(ctx context.Context, c *client.Core, cmd *cobra.Command) ([]string, error) {
	cluster, _ := cmd.Flags().GetString("cluster")
	ns, err := c.Nodes(ctx, cluster)
	var out []string
	for _, n := range ns {
		for _, k := range n.Kinds {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out, err
}

// completeActions lists the newest actions, those waiting for a decision
// first when the command decides.
func completeActions(ctx context.Context, c *client.Core, cmd *cobra.Command) ([]string, error) {
	flt := client.ActionFilter{Limit: 100}
	switch cmd.Name() {
	case "approve", "reject":
		flt.States = []action.State{action.PendingApprove}
	case "cancel":
		flt.States = []action.State{action.PendingApprove, action.PendingSchedule, action.New, action.Running}
	}
	page, err := c.Actions(ctx, flt)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range page.Actions {
		out = append(out, a.ID+"\t"+a.Kind+" on "+a.ClusterID+"/"+a.NodeID+" "+string(a.State))
	}
	return out, nil
}

func completeRuns(ctx context.Context, c *client.Core, _ *cobra.Command) ([]string, error) {
	list, err := c.Runs(ctx, client.RunFilter{Limit: 100})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range list.Runs {
		out = append(out, r.ID+"\t"+r.ClusterID+" "+r.State)
	}
	return out, nil
}

func completePlaybooks(ctx context.Context, c *client.Core, _ *cobra.Command) ([]string, error) {
	ps, err := c.Playbooks(ctx)
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"\t"+p.Description)
	}
	return out, err
}

func completeSchedules(ctx context.Context, c *client.Core, _ *cobra.Command) ([]string, error) {
	list, err := c.Schedules(ctx)
	var out []string
	for _, sc := range list {
		out = append(out, sc.Name+"\t"+sc.Playbook+" on "+sc.Cluster+" "+sc.State)
	}
	return out, err
}

func stateNames() []string {
	out := make([]string, len(action.States))
	for i, s := range action.States {
		out[i] = string(s)
	}
	return out
}

// completePolicies lists the ids of the live records of kind.
func completePolicies(kind string) completer {
	return func(ctx context.Context, c *client.Core, _ *cobra.Command) ([]string, error) {
		rs, err := c.Policies(ctx, kind, "", false)
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out, err
	}
}

// runStates are the states of a run (docs/runs-and-playbooks.md).
var runStates = []string{"PENDING_APPROVE", "RUNNING", "PAUSED", "DONE", "PARTIAL", "FAILED", "CANCELLED", "ABORTED"}

// argCompletion is what each client command's first argument completes to,
// by command path.
var argCompletion = map[string]completer{
	"muster action show": completeActions, "muster action approve": completeActions,
	"muster action reject": completeActions, "muster action cancel": completeActions,
	"muster action retry": completeActions, "muster action watch": completeActions,
	"muster action logs": completeActions,
	"muster run show":    completeRuns, "muster run approve": completeRuns, "muster run reject": completeRuns,
	"muster run pause": completeRuns, "muster run resume": completeRuns, "muster run cancel": completeRuns,
	"muster run watch": completeRuns, "muster run retry": completeRuns,
	"muster run promote": completeRuns, "muster run abort": completeRuns, "muster run urgent": completeRuns, "muster run nodes": completeRuns,
	"muster action urgent": completeActions,
	"muster node revoke":   completeNodes,
	"muster cluster show":  completeClusters, "muster cluster orchestrate": completeClusters,
	"muster freeze create": completeClusters,
	"muster window create": completeClusters, "muster budget set": completeClusters, "muster budget show": completeClusters,
	"muster budget delete": completeClusters, "muster budget history": completeClusters,
	"muster window delete": completePolicies(wire.KindWindow), "muster window history": completePolicies(wire.KindWindow),
	"muster approval-rule delete":  completePolicies(wire.KindApprovalRule),
	"muster approval-rule history": completePolicies(wire.KindApprovalRule),
	"muster node drain":            completeNodes, "muster node undrain": completeNodes, "muster node forget": completeNodes, "muster node replace": completeNodes,
	"muster cluster approve-on-alert": completeClusters,
	"muster playbook show":            completePlaybooks, "muster playbook start": completePlaybooks,
	"muster schedule show": completeSchedules, "muster schedule approve": completeSchedules,
	"muster schedule reject": completeSchedules, "muster schedule pause": completeSchedules,
	"muster schedule resume": completeSchedules, "muster schedule delete": completeSchedules,
}

// addCompletions gives every client command the completion of its first
// argument and of its flags' values, asking the core where the values live
// there.
func addCompletions(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if fn, ok := argCompletion[cmd.CommandPath()]; ok && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = onlyFirst(ask(fn))
		}
		if cmd.CommandPath() == "muster playbook plan" && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = onlyFirst(orFiles(ask(completePlaybooks)))
		}
		flag := func(name string, fn cobra.CompletionFunc) {
			if cmd.Flags().Lookup(name) != nil || cmd.PersistentFlags().Lookup(name) != nil {
				_ = cmd.RegisterFlagCompletionFunc(name, fn)
			}
		}
		flag("output", fixed(outputForms...))
		flag("cluster", ask(completeClusters))
		flag("node", ask(completeNodes))
		flag("kind", ask(completeKinds))
		flag("run", ask(completeRuns))
		flag("action", ask(completeActions))
		flag("playbook", ask(completePlaybooks))
		flag("role", fixed("viewer", "operator", "approver", "admin"))
		flag("type", fixed(append(slices.Clone(store.EventTypes), familyGlobs()...)...))
		if strings.HasPrefix(cmd.CommandPath(), "muster run ") {
			flag("state", fixed(runStates...))
		} else {
			flag("state", fixed(stateNames()...))
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func familyGlobs() []string {
	var out []string
	for _, f := range store.EventTypeFamilies() {
		out = append(out, f+".*")
	}
	return out
}
