package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
)

// newCoreStatusCmd is `muster core status`: the core replicas sharing the
// store, their last heartbeat and the cluster leases each holds.
func newCoreStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the core replicas, their last heartbeat and the cluster leases they hold",
		Args:  cli.NoArgs,
	}
	f := bindClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := f.core()
		if err != nil {
			return err
		}
		rs, err := c.Replicas(cmd.Context())
		if err != nil {
			return apiError(c, err)
		}
		if f.json() {
			return f.write(cmd.OutOrStdout(), rs)
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "Store:     %s\n", textsafe.Escape(rs.Store))
		if rs.LeaseTTLS > 0 {
			fmt.Fprintf(w, "Lease TTL: %s\n", time.Duration(rs.LeaseTTLS*float64(time.Second)))
		}
		fmt.Fprintln(w)
		t := newTable(w, "REPLICA", "ADDR", "LIVE", "HEARTBEAT", "VERSION", "LEASES")
		for _, r := range rs.Replicas {
			id := r.ID
			if id == rs.Self {
				id += " (this)"
			}
			var leases []string
			for _, l := range r.Leases {
				leases = append(leases, fmt.Sprintf("%s@%d", l.ClusterID, l.Epoch))
			}
			live := "no"
			if r.Live {
				live = "yes"
			}
			age := time.Since(r.HeartbeatTS).Round(100 * time.Millisecond)
			t.row(id, r.Addr, live, age.String()+" ago", r.Version, strings.Join(leases, " "))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(rs.PolicyDrift) > 0 {
			fmt.Fprintf(w, "\nPolicy drift: the configuration of %s disagrees with the store, which it follows:\n", textsafe.Escape(rs.Self))
			for _, d := range rs.PolicyDrift {
				fmt.Fprintf(w, "  %s\n", textsafe.Escape(d))
			}
		}
		return nil
	}
	return cmd
}
