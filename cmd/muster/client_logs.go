package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/textsafe"
)

// logsPoll is how often `action logs -f` reads the action: the agent
// commits a running action's output at most once a second.
const logsPoll = time.Second

func newActionLogsCmd(f *clientFlags) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ACTION",
		Short: "Print an action's output (the last 64 KiB), and follow it while it runs",
		Long: `Print an action's output: the last 64 KiB of what it printed. A RUNNING
action's output is in its record as it grows (the agent commits it at most
once a second, and the core pulls it in its next sync of the node). With
--follow, keep printing what it adds until the action is final; the exit
status is then 0 when it ended DONE and 1 otherwise. Until it runs, --follow
says on standard error what it waits for (an approver, its not-before, a
window, or the actions queued before it on its node), again when that changes.`,
		Example: `  muster action logs 3f0c8a52
  muster action logs 3f0c8a52 -f`,
		Args: exactArgs("ACTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.core()
			if err != nil {
				return err
			}
			return actionLogs(cmd.Context(), c, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr(), follow, logsPoll)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing the output as it grows, until the action is final")
	return cmd
}

// actionLogs prints the output of action ref on w and, following it, what
// it waits for on errW while it has not started.
func actionLogs(ctx context.Context, c *client.Core, ref string, w, errW io.Writer, follow bool, every time.Duration) error {
	a, err := c.Action(ctx, ref)
	if err != nil {
		return apiError(c, err)
	}
	printed := ""
	show := func(out string) error {
		add := newOutput(printed, out)
		printed = out
		if add == "" {
			return nil
		}
		_, err := io.WriteString(w, cli.SafeLines(add))
		return err
	}
	if err := show(a.Output); err != nil || !follow {
		return err
	}
	said := ""
	wait := func() error {
		line := waitingFor(ctx, c, a)
		if line == said || line == "" {
			return nil
		}
		said = line
		_, err := fmt.Fprintln(errW, textsafe.Escape(line))
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for !a.State.Final() {
		select {
		case <-ctx.Done():
			return nil // interrupted: the normal end of --follow
		case <-t.C:
		}
		if a, err = c.Action(ctx, a.ID); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return apiError(c, err)
		}
		if err := show(a.Output); err != nil {
			return err
		}
		if err := wait(); err != nil {
			return err
		}
	}
	if a.State != action.Done {
		reason := ""
		if a.StateReason != "" {
			reason = ": " + a.StateReason
		}
		return fmt.Errorf("%w: %s ended %s%s", errActionNotDone, a.ID, a.State, reason)
	}
	return nil
}

// waitingFor says what an action that has not started waits for ("" once
// it runs): an approver, the core sending it (its not-before, a window, a
// freeze, the disruption budget: its reason says which), or, on its node
// already, the actions the node runs before it.
func waitingFor(ctx context.Context, c *client.Core, a *action.Action) string {
	head := fmt.Sprintf("waiting: action %s is %s", shortID(a.ID), a.State)
	why := ""
	if a.StateReason != "" {
		why = " (" + a.StateReason + ")"
	}
	switch a.State {
	case action.PendingApprove:
		return fmt.Sprintf("%s%s: it waits for an approver (muster action approve %s)", head, why, shortID(a.ID))
	case action.PendingSchedule:
		line := fmt.Sprintf("%s: the core has not sent it to node %s yet", head, a.NodeID)
		if a.NotBefore != nil && a.NotBefore.After(time.Now()) {
			line += ", not before " + ts(*a.NotBefore)
		}
		return line + why
	case action.New:
		line := fmt.Sprintf("%s: queued on node %s", head, a.NodeID)
		page, err := c.Actions(ctx, client.ActionFilter{Cluster: a.ClusterID, Node: a.NodeID, States: []action.State{action.Running}, Limit: 5})
		if err != nil || len(page.Actions) == 0 {
			return line + why
		}
		var ahead []string
		for _, r := range page.Actions {
			if r.ID != a.ID {
				ahead = append(ahead, fmt.Sprintf("%s (%s, RUNNING)", shortID(r.ID), r.Kind))
			}
		}
		if len(ahead) == 0 {
			return line + why
		}
		return line + " behind " + strings.Join(ahead, ", ") + why
	}
	return ""
}

// newOutput returns what out, an output tail, adds to prev, the tail
// printed before. The tail keeps the last 64 KiB, so prev's start may have
// gone: out then starts inside prev, and what follows prev's end is new.
func newOutput(prev, out string) string {
	if strings.HasPrefix(out, prev) {
		return out[len(prev):]
	}
	// Where in prev may out start? Where out's first bytes appear, or
	// anywhere in prev's last bytes (shorter than those).
	head := out[:min(len(out), 64)]
	tryFrom := func(k int) (string, bool) {
		if strings.HasPrefix(out, prev[k:]) {
			return out[len(prev)-k:], true
		}
		return "", false
	}
	for i := 0; head != ""; {
		j := strings.Index(prev[i:], head)
		if j < 0 {
			break
		}
		if add, ok := tryFrom(i + j); ok {
			return add
		}
		i += j + 1
	}
	for k := max(1, len(prev)-len(head)); k < len(prev); k++ {
		if add, ok := tryFrom(k); ok {
			return add
		}
	}
	return "[…]\n" + out
}
