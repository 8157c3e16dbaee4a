package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/shared/gossip"
)

func newGossipCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gossip",
		Short: "Gossip pool helpers",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "keygen",
		Short: "Print a new gossip encryption key (base64, 32 bytes)",
		Long: `Print a new random key for the gossip pool. Write it to a file readable
only by muster (mode 0600) and point gossip.key_file at it on the core and on
every agent: members with another key are never admitted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := gossip.GenerateKey()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), k)
			return nil
		},
	})
	return cmd
}
