// Package gendocs writes what the packages install beside a binary from
// its cobra commands: a man page per command and the bash, zsh and fish
// completion scripts (docs/operations.md, "Packages"). Only a binary built
// with the gendocs tag links it (cmd/internal/cli's hidden gendocs
// command), so the binaries people deploy carry none of it.
package gendocs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Write writes, for the program of root, dir/man1/<command>.1 for each
// command people may run (cobra's name: the command's path with dashes,
// muster-action-create.1), and dir/completions/bash, zsh and fish: cobra's
// scripts, which ask the program itself (its hidden __complete command) at
// completion time, so the scripts stay right as commands change. source
// is the man pages' footer, such as "muster v1.2.0".
func Write(root *cobra.Command, dir, source string) error {
	man := filepath.Join(dir, "man1")
	completions := filepath.Join(dir, "completions")
	for _, d := range []string{man, completions} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Section: "1", Source: source, Manual: "muster manual"}
	if err := doc.GenManTree(root, header, man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	name := root.Name()
	for shell, gen := range map[string]func(*bytes.Buffer) error{
		"bash": func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) },
		"zsh":  func(b *bytes.Buffer) error { return root.GenZshCompletion(b) },
		"fish": func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return fmt.Errorf("%s completion: %w", shell, err)
		}
		if !strings.Contains(b.String(), name) {
			return fmt.Errorf("%s completion does not name %s", shell, name)
		}
		if err := os.WriteFile(filepath.Join(completions, shell), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
