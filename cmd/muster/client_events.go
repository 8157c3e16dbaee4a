package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

func newEventsCmd() *cobra.Command {
	var since int64
	var limit int
	var follow bool
	var flt client.EventFilter
	var f *clientFlags
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the event log (the audit trail), and follow it",
		Long: `Print the event log, the core's audit trail. Without --since it prints the
newest --limit events; with --follow it then prints each new event as it is
appended, until interrupted, in the same layout. With -o json and --follow,
each event is one JSON line; with -o yaml, one YAML document. With -o
cloudevents, each event is one line of the CloudEvents 1.0 JSON envelope, for
a log shipper: its id is the event's sequence number, so --since the last id
read resumes after it.`,
		Example: `  muster events --cluster prod --type node.down,node.up
  muster events --run 3f0c8a52 --follow
  muster events --type 'action.*' -o json
  muster events --follow -o cloudevents --since 1200 >> /var/log/muster/audit.jsonl`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return cli.UsageError("--limit must be positive")
			}
			var err error
			if flt.Types, err = store.ParseEventTypes(strings.Join(flt.Types, ",")); err != nil {
				return cli.UsageError("--type: %v", err)
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("since") {
				since = -1
			}
			ctx := cmd.Context()
			page, err := c.Events(ctx, since, limit, flt)
			if err != nil {
				return apiError(c, err)
			}
			w := cmd.OutOrStdout()
			if !follow && f.output == outputCloudEvents {
				for _, e := range page.Events {
					if err := writeJSONLine(w, wire.ToCloudEvent(e)); err != nil {
						return err
					}
				}
				return nil
			}
			if !follow {
				if f.output == "name" { // an event's name is its sequence number
					for _, e := range page.Events {
						fmt.Fprintln(w, e.Seq)
					}
					return nil
				}
				if f.json() {
					return f.write(w, page)
				}
				if err := eventHeader(w, f.wide()); err != nil {
					return err
				}
				for _, e := range page.Events {
					if err := eventLine(w, e, f.wide()); err != nil {
						return err
					}
				}
				return nil
			}
			return followEvents(ctx, c, page, flt, w, f)
		},
	}
	f = bindClientFlags(cmd)
	f.moreOutputs = []string{outputCloudEvents}
	fl := cmd.Flags()
	fl.Int64Var(&since, "since", 0, "print the events after this sequence number")
	fl.IntVar(&limit, "limit", 20, "how many events to print (at most 1000)")
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new events as they happen")
	fl.StringVar(&flt.ActionID, "action", "", "only the events of this action id")
	fl.StringVar(&flt.RunID, "run", "", "only the events of this run id")
	fl.StringVar(&flt.Cluster, "cluster", "", "only the events of this cluster")
	fl.StringVar(&flt.Node, "node", "", "only the events of this node")
	fl.StringSliceVar(&flt.Types, "type", nil, "only these event types or families, like node.down,run.* (comma list)")
	return cmd
}

// outputCloudEvents is the -o form of events as CloudEvents, one JSON line each.
const outputCloudEvents = "cloudevents"

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// eventLine prints one event in fixed widths, so that a list and a
// followed stream look the same and each event prints as soon as it
// arrives: seq, time, type, actor, client address, action, message. wide
// adds the cluster, the node and the run.
func eventLine(w io.Writer, e wire.Event, wide bool) error {
	esc := func(s string) string { return textsafe.Escape(dash(s)) }
	if wide {
		return eventColumns(w, true, fmt.Sprint(e.Seq), ts(e.TS), esc(e.Type), esc(e.Actor), esc(e.ClientAddr), esc(e.ClusterID),
			esc(e.NodeID), esc(shortID(e.ActionID)), esc(shortID(e.RunID)), textsafe.Escape(e.Message))
	}
	return eventColumns(w, false, fmt.Sprint(e.Seq), ts(e.TS), esc(e.Type), esc(e.Actor), esc(e.ClientAddr),
		esc(shortID(e.ActionID)), textsafe.Escape(e.Message))
}

// eventHeader names the columns of eventLine, in its widths.
func eventHeader(w io.Writer, wide bool) error {
	at := fmt.Sprintf("%-*s", len(ts(time.Now())), "TIME")
	if wide {
		return eventColumns(w, true, "SEQ", at, "TYPE", "ACTOR", "CLIENT", "CLUSTER", "NODE", "ACTION", "RUN", "MESSAGE")
	}
	return eventColumns(w, false, "SEQ", at, "TYPE", "ACTOR", "CLIENT", "ACTION", "MESSAGE")
}

// eventColumns prints cells, escaped already, in the widths of the events'
// table: the header and every line share them.
func eventColumns(w io.Writer, wide bool, cells ...string) error {
	format := "%-7s %s  %-24s %-10s %-15s %-8s %s\n"
	if wide {
		format = "%-7s %s  %-24s %-10s %-15s %-10s %-12s %-8s %-8s %s\n"
	}
	args := make([]any, len(cells))
	for i, c := range cells {
		args[i] = c
	}
	_, err := fmt.Fprintf(w, format, args...)
	return err
}

// followEvents prints page, then streams what follows it, each event as
// the -o form wants it.
func followEvents(ctx context.Context, c *client.Core, page *wire.EventList, flt client.EventFilter, w io.Writer, f *clientFlags) error {
	print := func(e wire.Event) error {
		switch f.output {
		case "json":
			return writeJSONLine(w, e)
		case outputCloudEvents:
			return writeJSONLine(w, wire.ToCloudEvent(e))
		case "yaml":
			if _, err := fmt.Fprintln(w, "---"); err != nil {
				return err
			}
			return writeYAML(w, e)
		case "name":
			_, err := fmt.Fprintln(w, e.Seq)
			return err
		}
		return eventLine(w, e, f.wide())
	}
	if f.output == "table" || f.wide() {
		if err := eventHeader(w, f.wide()); err != nil {
			return err
		}
	}
	for _, e := range page.Events {
		if err := print(e); err != nil {
			return err
		}
	}
	s, err := c.Stream(ctx, page.Next, flt)
	if err != nil {
		return apiError(c, err)
	}
	defer s.Close()
	for {
		e, err := s.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of --follow
			}
			if errors.Is(err, client.ErrStreamClosed) {
				return fmt.Errorf("the core at %s closed the event stream after seq %d", c.Addr(), s.LastID())
			}
			return err
		}
		if err := print(*e); err != nil {
			return err
		}
	}
}
