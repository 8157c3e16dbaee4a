//go:build gendocs

package cli

import (
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/gendocs"
)

// addGenDocs gives root, in a binary built with the gendocs tag (as
// ./packaging builds one for the host), the hidden command that writes its
// man pages and completion scripts: gendocs DIR SOURCE.
func addGenDocs(root *cobra.Command) {
	root.AddCommand(&cobra.Command{
		Use:    "gendocs DIR SOURCE",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			return gendocs.Write(root, args[0], args[1])
		},
	})
}
