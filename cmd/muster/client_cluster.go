package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "List clusters, show one, ask for a full sync, approve its on_alert playbook",
	}
	f := bindClientFlags(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List clusters with their status and node counts",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			cs, err := c.Clusters(cmd.Context())
			if err != nil {
				return apiError(c, err)
			}
			l := newListing(wire.ClusterList{Clusters: cs}, "CLUSTER", "STATUS", "NODES", "UP", "DRAINED", "DOWN", "UNKNOWN", "REASON")
			for _, cl := range cs {
				n := cl.NodeCounts
				l.add(cl.ID, cl, cl.ID, cl.Status, strconv.Itoa(n.Total), strconv.Itoa(n.Up), strconv.Itoa(n.Drained), strconv.Itoa(n.Down),
					strconv.Itoa(n.Unknown), cl.StatusReason)
			}
			return f.printList(cmd.OutOrStdout(), l)
		},
	}, &cobra.Command{
		Use:   "show CLUSTER",
		Short: "Show one cluster and its nodes",
		Args:  exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			cl, err := c.Cluster(cmd.Context(), args[0])
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), cl)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Cluster:  %s\nStatus:   %s\n", textsafe.Escape(cl.ID), textsafe.Escape(cl.Status))
			if cl.StatusReason != "" {
				fmt.Fprintf(w, "Reason:   %s\n", textsafe.Escape(cl.StatusReason))
			}
			fmt.Fprintf(w, "Nodes:    %d (%d up, %d drained, %d down, %d unknown)\n", cl.NodeCounts.Total, cl.NodeCounts.Up,
				cl.NodeCounts.Drained, cl.NodeCounts.Down, cl.NodeCounts.Unknown)
			if b := cl.Budget; b != nil {
				fmt.Fprintf(w, "Budget:   %d of %d unavailable (max_unavailable %s)", b.Unavailable, b.Max, b.MaxUnavailable)
				if b.Held > 0 {
					fmt.Fprintf(w, ", %d action(s) held", b.Held)
				}
				fmt.Fprintln(w)
				for _, n := range b.Nodes {
					fmt.Fprintf(w, "          %s: %s\n", textsafe.Escape(n.ID), textsafe.Escape(n.Reason))
				}
			}
			printCalendar(w, cl.Calendar)
			printMembers(w, cl.Members)
			printOnAlert(w, cl.OnAlert)
			for _, q := range cl.ReplaceRequests {
				fmt.Fprintf(w, "Request:  %s enrolled asking to replace %s; approve with: muster node replace %s --with %s --cluster %s\n",
					textsafe.Escape(q.NodeID), textsafe.Escape(q.Replaces), textsafe.Escape(q.Replaces), textsafe.Escape(q.NodeID),
					textsafe.Escape(cl.ID))
			}
			fmt.Fprintln(w)
			return f.printList(cmd.OutOrStdout(), nodeListing(cl.Nodes, false))
		},
	}, &cobra.Command{
		Use:   "orchestrate CLUSTER",
		Short: "Ask the core for a full sync of a cluster now",
		Args:  exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			if err := c.Orchestrate(cmd.Context(), args[0]); err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), wire.Accepted{Status: "accepted", Message: "full sync of " + args[0] + " requested"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Full sync of %s requested.\n", textsafe.Escape(args[0]))
			return nil
		},
	}, newApproveOnAlertCmd(f))
	return cmd
}

// newApproveOnAlertCmd is `muster cluster approve-on-alert`.
func newApproveOnAlertCmd(f *clientFlags) *cobra.Command {
	var digest string
	cmd := &cobra.Command{
		Use:   "approve-on-alert CLUSTER [--digest D]",
		Short: "Approve the cluster's on_alert playbook as it is now (approver role)",
		Long: `From then on the core starts the playbook the cluster's expect.on_alert
names when missing declared nodes make the cluster ALERT, at most once per
alert, with the missing nodes as the parameter 'missing'. A new version of
the playbook, or other params, void the approval: approve it again.
'muster cluster show' shows its digest; --digest approves only that one.`,
		Example: "  muster cluster approve-on-alert prod",
		Args:    exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			out, err := c.ApproveOnAlert(cmd.Context(), args[0], digest)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return f.write(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Approved the on_alert playbook %s v%d of cluster %s (digest %.12s).\n",
				textsafe.Escape(out.Playbook), out.PlaybookVersion, textsafe.Escape(args[0]), textsafe.Escape(out.Digest))
			return nil
		},
	}
	cmd.Flags().StringVar(&digest, "digest", "", "approve only if this is its digest now (muster cluster show)")
	return cmd
}

// printOnAlert prints the cluster's on_alert playbook and where it
// stands (nothing when it names none).
func printOnAlert(w io.Writer, a *wire.OnAlert) {
	if a == nil {
		return
	}
	v := "latest"
	if a.PlaybookVersion > 0 {
		v = fmt.Sprintf("v%d", a.PlaybookVersion)
	}
	fmt.Fprintf(w, "On alert: playbook %s (%s)", textsafe.Escape(a.Playbook), v)
	if a.Approved {
		fmt.Fprintf(w, ", approved by %s (digest %.12s)", textsafe.Escape(a.ApprovedBy), textsafe.Escape(a.Digest))
	}
	fmt.Fprintln(w)
	if a.Problem != "" {
		fmt.Fprintf(w, "          %s\n", textsafe.Escape(a.Problem))
	}
	if a.AlertSince != nil {
		fmt.Fprintf(w, "          alert since %s, missing %s\n", ts(*a.AlertSince), textsafe.Escape(strings.Join(a.Missing, ", ")))
	}
	if a.RunID != "" || a.Outcome != "" {
		out := a.Outcome
		if out == "" {
			out = "running"
		}
		fmt.Fprintf(w, "          last alert (%d in all): run %s, %s\n", a.Alerts, textsafe.Escape(a.RunID), textsafe.Escape(out))
	}
}

// printMembers prints what a cluster's declared membership says (nothing
// when it declares none).
func printMembers(w io.Writer, m *wire.Members) {
	if m == nil {
		return
	}
	if len(m.Missing) == 0 {
		fmt.Fprintln(w, "Missing:  none (every declared node is there)")
	} else {
		fmt.Fprintln(w, "Missing:")
		for _, n := range m.Missing {
			if n.ID == "" {
				fmt.Fprintf(w, "          %s\n", textsafe.Escape(n.Reason))
				continue
			}
			fmt.Fprintf(w, "          %s: %s\n", textsafe.Escape(n.ID), textsafe.Escape(n.Reason))
		}
	}
	if len(m.Unexpected) > 0 {
		ids := make([]string, len(m.Unexpected))
		for i, id := range m.Unexpected {
			ids[i] = textsafe.Escape(id)
		}
		fmt.Fprintf(w, "Unexpected: %s (seen, not declared)\n", strings.Join(ids, ", "))
	}
}

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "List, drain, undrain, forget and revoke the nodes the core knows",
	}
	f := bindClientFlags(cmd)
	var (
		cluster string
		sel     []string
		watch   watchFlags
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List nodes, of every cluster or of one",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := labels.ParseSelector(sel); err != nil {
				return &cli.ExitError{Code: 2, Err: fmt.Errorf("--label: %v", err)}
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			return watch.list(cmd.Context(), cmd.OutOrStdout(), f, func(ctx context.Context) (*listing, error) {
				nodes, err := c.Nodes(ctx, cluster, sel...)
				if err != nil {
					return nil, apiError(c, err)
				}
				return nodeListing(nodes, true), nil
			})
		},
	}
	watch.bind(list)
	list.Flags().StringVar(&cluster, "cluster", "", "only the nodes of this cluster")
	list.Flags().StringArrayVar(&sel, "label", nil, "only the nodes with this label, as key=value (repeatable: all must match)")
	cmd.AddCommand(list)
	for _, v := range []struct{ use, short string }{
		{"drain", "Send no new actions to a node; what it holds finishes"},
		{"undrain", "Send actions to a drained node again"},
		{"forget", "Remove a node that is gone for good; its open actions end (LOST, node forgotten)"},
	} {
		var in, reason string
		sub := &cobra.Command{
			Use:   v.use + " NODE",
			Short: v.short,
			Args:  exactArgs("NODE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.core()
				if err != nil {
					return err
				}
				clusterID, err := nodeCluster(cmd, c, in, args[0])
				if err != nil {
					return err
				}
				var out any
				switch v.use {
				case "forget":
					out, err = c.ForgetNode(cmd.Context(), clusterID, args[0])
				case "drain":
					out, err = c.DrainNode(cmd.Context(), clusterID, args[0], reason)
				default:
					out, err = c.UndrainNode(cmd.Context(), clusterID, args[0])
				}
				if err != nil {
					return apiError(c, err)
				}
				if f.json() {
					return f.write(cmd.OutOrStdout(), out)
				}
				w := cmd.OutOrStdout()
				switch r := out.(type) {
				case *wire.ForgetResult:
					fmt.Fprintf(w, "Node %s/%s forgotten; %d open action(s) ended.\n", textsafe.Escape(clusterID), textsafe.Escape(args[0]), r.ActionsEnded)
				case *wire.Node:
					fmt.Fprintf(w, "Node %s/%s is %s.\n", textsafe.Escape(clusterID), textsafe.Escape(args[0]), textsafe.Escape(r.Status))
				}
				return nil
			},
		}
		sub.Flags().StringVar(&in, "cluster", "", "the node's cluster (needed when several clusters have a node of that name)")
		if v.use == "drain" {
			sub.Flags().StringVar(&reason, "reason", "", "why the node is drained (shown with the node, recorded in its event)")
		}
		cmd.AddCommand(sub)
	}
	cmd.AddCommand(newNodeRevokeCmd(f), newNodeReplaceCmd(f))
	return cmd
}

func newNodeReplaceCmd(f *clientFlags) *cobra.Command {
	var in, with string
	cmd := &cobra.Command{
		Use:   "replace OLD --with NEW",
		Short: "A new node takes a dead node's declared place and labels (admin role)",
		Long: `NEW takes OLD's place in its cluster's declared membership (expect:) and
holds OLD's labels over its agent's own from now on, at every sync. OLD is
forgotten: its open actions end, its actions and their history stay
readable under its id. OLD's certificates from enrollment are revoked.
The cluster is the one NEW is in, unless --cluster says.`,
		Example: `  muster node replace web-3 --with web-9`,
		Args:    exactArgs("OLD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if with == "" {
				return cli.UsageError("--with NEW is required: the node that takes %s's place", args[0])
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			clusterID, err := nodeCluster(cmd, c, in, with)
			if err != nil {
				return err
			}
			out, err := c.ReplaceNode(cmd.Context(), clusterID, args[0], with)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Node %s/%s replaced by %s", textsafe.Escape(clusterID), textsafe.Escape(args[0]), textsafe.Escape(with))
			if len(out.Labels) > 0 {
				fmt.Fprintf(w, ", which holds its labels %s", textsafe.Escape(labels.Set(out.Labels).String()))
			}
			fmt.Fprintf(w, ".\n%d open action(s) of %s ended; %d certificate(s) revoked.\n", out.ActionsEnded,
				textsafe.Escape(args[0]), len(out.Serials))
			return nil
		},
	}
	cmd.Flags().StringVar(&with, "with", "", "the node that takes OLD's place (required)")
	cmd.Flags().StringVar(&in, "cluster", "", "the cluster (needed when several clusters have a node named NEW)")
	return cmd
}

func newNodeRevokeCmd(f *clientFlags) *cobra.Command {
	var in, reason string
	cmd := &cobra.Command{
		Use:   "revoke NODE [--reason TEXT]",
		Short: "Revoke a node's certificates: the core refuses the node at once (admin role)",
		Long: `Put every certificate the core signed for NODE (by enrollment) on the
revocation list. The core drops its connections to the node, refuses the
node's certificate on every new one and refuses its gossip claims; the
node cannot renew. It shows as REVOKED until it enrolls again, which needs
a new join token.`,
		Example: `  muster node revoke web-7 --reason "disk sent for repair"`,
		Args:    exactArgs("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			clusterID, err := nodeCluster(cmd, c, in, args[0])
			if err != nil {
				return err
			}
			out, err := c.RevokeNode(cmd.Context(), clusterID, args[0], reason)
			if err != nil {
				return apiError(c, err)
			}
			if f.json() {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Node %s/%s revoked: %d certificate(s) on the revocation list.\n",
				textsafe.Escape(clusterID), textsafe.Escape(args[0]), len(out.Serials))
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "cluster", "", "the node's cluster (needed when several clusters have a node of that name)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the event and shown with the node")
	return cmd
}

// nodeCluster returns the cluster of the node named id: the one given, or
// the only cluster that has such a node.
func nodeCluster(cmd *cobra.Command, c *client.Core, given, id string) (string, error) {
	if given != "" {
		return given, nil
	}
	nodes, err := c.Nodes(cmd.Context(), "")
	if err != nil {
		return "", apiError(c, err)
	}
	var in []string
	for _, n := range nodes {
		if n.ID == id {
			in = append(in, n.ClusterID)
		}
	}
	switch len(in) {
	case 0:
		return "", fmt.Errorf("no node %q in any cluster", id)
	case 1:
		return in[0], nil
	}
	return "", cli.UsageError("node %q is in clusters %s: give --cluster", id, strings.Join(in, ", "))
}

// nodeReason is why a node is as it is: who drained it and why, then its
// status reason, its revocation and the kinds whose args_schema the core
// refuses.
func nodeReason(n *wire.Node) string {
	var parts []string
	if n.Drained {
		d := "drained by " + n.DrainedBy
		if n.DrainReason != "" {
			d += ": " + n.DrainReason
		}
		parts = append(parts, d)
	}
	if n.StatusReason != "" {
		parts = append(parts, n.StatusReason)
	}
	if n.Revoked {
		parts = append(parts, "certificate revoked: "+n.RevokeReason)
	}
	for _, k := range slices.Sorted(maps.Keys(n.ArgsSchemasRefused)) {
		parts = append(parts, k+" unusable, its args_schema refused: "+n.ArgsSchemasRefused[k])
	}
	return strings.Join(parts, "; ")
}

// nodeListing is nodes as node list and cluster show print them; -o wide
// lists each node's kinds instead of counting them.
func nodeListing(nodes []wire.Node, withCluster bool) *listing {
	header := []string{"NODE", "STATUS", "ADDR", "SOURCE", "VERSION", "LAST CONTACT", "KINDS", "LABELS", "REASON"}
	if withCluster {
		header = append([]string{"CLUSTER"}, header...)
	}
	l := &listing{records: wire.NodeList{Nodes: nodes}, header: header, wide: header}
	for _, n := range nodes {
		status := n.Status
		if n.Revoked {
			status = "REVOKED"
		}
		row := []string{n.ID, status, n.Addr, n.Source, n.Version, tsPtr(n.LastContact), strconv.Itoa(len(n.Kinds)),
			labels.Set(n.Labels).String(), nodeReason(&n)}
		if withCluster {
			row = append([]string{n.ClusterID}, row...)
		}
		wide := slices.Clone(row)
		wide[len(wide)-3] = strings.Join(n.Kinds, ",")
		l.rows = append(l.rows, listRow{key: n.ClusterID + "/" + n.ID, record: n, cells: row, wide: wide})
	}
	return l
}

// printCalendar shows a cluster's maintenance windows and freezes, whether
// disruptive work may go now, and what waits for them.
func printCalendar(w io.Writer, cal *wire.Calendar) {
	if cal == nil {
		return
	}
	at := func(t *time.Time) string { return t.Local().Format(time.RFC3339) }
	switch {
	case cal.Frozen != nil:
		fmt.Fprintf(w, "Schedule: frozen until %s: %s\n", at(&cal.Frozen.To), textsafe.Escape(cal.Frozen.Reason))
	case cal.InWindow && cal.CloseAt != nil:
		fmt.Fprintf(w, "Schedule: open, the window closes %s\n", at(cal.CloseAt))
	case cal.InWindow:
		fmt.Fprintln(w, "Schedule: open (no window set)")
	case cal.NextOpen != nil:
		fmt.Fprintf(w, "Schedule: closed, the next window opens %s\n", at(cal.NextOpen))
	default:
		fmt.Fprintln(w, "Schedule: closed, no window opens again")
	}
	if cal.Frozen != nil && !cal.InWindow && cal.NextOpen != nil {
		fmt.Fprintf(w, "          outside the windows too; the next opens %s\n", at(cal.NextOpen))
	}
	for _, win := range cal.Windows {
		fmt.Fprintf(w, "          window %s for %s (%s)\n", textsafe.Escape(win.Cron), textsafe.Escape(win.Duration), textsafe.Escape(win.Timezone))
	}
	for _, f := range cal.Freezes {
		fmt.Fprintf(w, "          freeze %s to %s: %s\n", at(&f.From), at(&f.To), textsafe.Escape(f.Reason))
	}
	if cal.Waiting > 0 {
		fmt.Fprintf(w, "          %d action(s) wait for a window, a freeze to end or their not_before\n", cal.Waiting)
	}
}
