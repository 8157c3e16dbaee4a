package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

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
appended, until interrupted. With -o json and --follow, each event is one
JSON line.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError("--limit must be positive")
			}
			c, err := f.core()
			if err != nil {
				return err
			}
			asJSON := f.json()
			if !cmd.Flags().Changed("since") {
				since = -1
			}
			ctx := cmd.Context()
			page, err := c.Events(ctx, since, limit, flt)
			if err != nil {
				return apiError(c, err)
			}
			w := cmd.OutOrStdout()
			if !follow {
				if asJSON {
					return writeJSON(w, page)
				}
				t := newTable(w, eventHeader...)
				for _, e := range page.Events {
					t.row(eventRow(e)...)
				}
				return t.flush()
			}
			return followEvents(ctx, c, page, flt, w, asJSON)
		},
	}
	f = bindClientFlags(cmd)
	fl := cmd.Flags()
	fl.Int64Var(&since, "since", 0, "print the events after this sequence number")
	fl.IntVar(&limit, "limit", 20, "how many events to print (at most 1000)")
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new events as they happen")
	fl.StringVar(&flt.ActionID, "action", "", "only the events of this action id")
	fl.StringVar(&flt.Cluster, "cluster", "", "only the events of this cluster")
	return cmd
}

var eventHeader = []string{"SEQ", "TIME", "TYPE", "ACTOR", "FROM", "ACTION", "MESSAGE"}

func eventRow(e wire.Event) []string {
	return []string{strconv.FormatInt(e.Seq, 10), ts(e.TS), e.Type, e.Actor, e.ClientAddr, shortID(e.ActionID), e.Message}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// followEvents prints page, then streams what follows it.
func followEvents(ctx context.Context, c *client.Core, page *wire.EventList, flt client.EventFilter, w io.Writer, asJSON bool) error {
	print := func(e wire.Event) error {
		if asJSON {
			return writeJSONLine(w, e)
		}
		// Fixed widths: each event prints as soon as it arrives.
		_, err := fmt.Fprintf(w, "%-7d %s  %-24s %-10s %-8s %s\n", e.Seq, ts(e.TS), textsafe.Escape(e.Type), textsafe.Escape(e.Actor),
			textsafe.Escape(dash(shortID(e.ActionID))), textsafe.Escape(e.Message))
		return err
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
