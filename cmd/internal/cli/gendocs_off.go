//go:build !gendocs

package cli

import "github.com/spf13/cobra"

// addGenDocs adds nothing: the binaries people deploy have no gendocs
// command (gendocs.go, built with the gendocs tag, has it).
func addGenDocs(*cobra.Command) {}
