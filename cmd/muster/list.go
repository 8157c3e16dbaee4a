package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
)

// listing is one answer of a list command: its records, as -o json, yaml
// and name print them, and its rows, as the table and -o wide print them.
// Every list command that builds one prints every -o form the same way
// (printList) and may be watched (watchList).
type listing struct {
	records any
	// header names the table's columns; wide those of -o wide, which adds
	// columns to them (nil: the table's).
	header, wide []string
	rows         []listRow
}

// listRow is one row of a listing.
type listRow struct {
	// key is the row's identity (an id): a watch compares rows by it.
	key string
	// cells are under the header, wide under the wide header.
	cells, wide []string
	// record is the row's record, as -o json, yaml and name print it
	// alone (a watch prints each changed record so).
	record any
}

// newListing is a listing of records whose table has these columns, and
// -o wide no more.
func newListing(records any, header ...string) *listing {
	return &listing{records: records, header: header}
}

// add adds a row: its key, its record and its cells.
func (l *listing) add(key string, record any, cells ...string) {
	l.rows = append(l.rows, listRow{key: key, record: record, cells: cells})
}

func (l *listing) columns(wide bool) []string {
	if wide && l.wide != nil {
		return l.wide
	}
	return l.header
}

func (r *listRow) of(wide bool) []string {
	if wide && r.wide != nil {
		return r.wide
	}
	return r.cells
}

// printList prints l in the -o form of f.
func (f *clientFlags) printList(w io.Writer, l *listing) error {
	if f.json() {
		return f.write(w, l.records)
	}
	t := newTable(w, l.columns(f.wide())...)
	for i := range l.rows {
		t.row(l.rows[i].of(f.wide())...)
	}
	return t.flush()
}

// watchFlags are --watch and --watch-interval of a list command.
type watchFlags struct {
	on       bool
	interval time.Duration
}

func (wf *watchFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&wf.on, "watch", "w", false, "after the list, print a line for each row that changes, until interrupted (as kubectl get -w)")
	cmd.Flags().DurationVar(&wf.interval, "watch-interval", 2*time.Second, "how often --watch asks the core")
}

// list prints what fetch gives, once, or under --watch as watchList does.
func (wf *watchFlags) list(ctx context.Context, w io.Writer, f *clientFlags, fetch func(context.Context) (*listing, error)) error {
	if !wf.on {
		l, err := fetch(ctx)
		if err != nil {
			return err
		}
		return f.printList(w, l)
	}
	if wf.interval < 100*time.Millisecond {
		return cli.UsageError("--watch-interval is at least 100ms, not %s", wf.interval)
	}
	return f.watchList(ctx, w, wf.interval, fetch)
}

// watchList prints the listing fetch gives, then asks again every interval
// and prints a line for each row that is new or changed, until ctx ends (an
// interrupt ends a watch without error). The table keeps the widths of its
// first print, so that later lines line up under it (a longer cell pushes
// its line alone); -o json prints one record a line, -o yaml one document
// each, -o name one name each.
func (f *clientFlags) watchList(ctx context.Context, w io.Writer, interval time.Duration, fetch func(context.Context) (*listing, error)) error {
	l, err := fetch(ctx)
	if err != nil {
		return err
	}
	wide := f.wide()
	header := l.columns(wide)
	widths := make([]int, len(header))
	measure := func(cells []string) {
		for i, c := range cells {
			if i < len(widths) {
				widths[i] = max(widths[i], len(cellText(c)))
			}
		}
	}
	measure(header)
	for i := range l.rows {
		measure(l.rows[i].of(wide))
	}
	line := func(cells []string) error {
		var b strings.Builder
		for i, c := range cells {
			c = cellText(c)
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			fmt.Fprintf(&b, "%-*s", max(widths[min(i, len(widths)-1)], len(c))+2, c)
		}
		_, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		return err
	}
	print := func(r *listRow) error {
		switch f.output {
		case "json":
			return writeJSONLine(w, r.record)
		case "yaml":
			if _, err := fmt.Fprintln(w, "---"); err != nil {
				return err
			}
			return writeYAML(w, r.record)
		case "name":
			return writeNames(w, r.record)
		}
		return line(r.of(wide))
	}
	if !f.json() {
		if err := line(header); err != nil {
			return err
		}
	}
	seen := map[string]string{}
	show := func(l *listing) error {
		for i := range l.rows {
			r := &l.rows[i]
			sig := strings.Join(r.of(wide), "\x00")
			if seen[r.key] == sig {
				continue
			}
			seen[r.key] = sig
			if err := print(r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := show(l); err != nil {
		return err
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		l, err := fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := show(l); err != nil {
			return err
		}
	}
}

// cellText is a table cell as it prints: escaped (a cell is whatever the
// core holds, which agents, commands and other users wrote), "-" when
// empty.
func cellText(c string) string {
	if c == "" {
		return "-"
	}
	return textsafe.Escape(c)
}
