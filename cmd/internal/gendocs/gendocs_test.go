package gendocs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestWriteManPagesAndCompletions: a program of two visible commands and
// a hidden one gets a man page per visible command, with the source in
// its footer, and completion scripts that name it; bash parses its
// script.
func TestWriteManPagesAndCompletions(t *testing.T) {
	t.Parallel()
	run := func(*cobra.Command, []string) error { return nil }
	root := &cobra.Command{Use: "prog", Short: "A program"}
	sub := &cobra.Command{Use: "sub", Short: "A subcommand", RunE: run}
	sub.Flags().String("thing", "", "the thing")
	root.AddCommand(sub, &cobra.Command{Use: "secret", Hidden: true, RunE: run})
	dir := t.TempDir()
	if err := Write(root, dir, "prog v1.2.3"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "man1"))
	if err != nil {
		t.Fatal(err)
	}
	var pages []string
	for _, e := range entries {
		pages = append(pages, e.Name())
	}
	if want := []string{"prog-sub.1", "prog.1"}; !slices.Equal(pages, want) {
		t.Errorf("man pages %q, want %q", pages, want)
	}
	page, err := os.ReadFile(filepath.Join(dir, "man1", "prog-sub.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `.TH "PROG-SUB" "1"`) || !strings.Contains(string(page), "prog v1.2.3") || !strings.Contains(string(page), "thing") {
		t.Errorf("prog-sub.1 has not its title, source and flag:\n%s", page)
	}
	for shell, want := range map[string]string{
		"bash": "__start_prog",
		"zsh":  "#compdef prog",
		"fish": "complete -c prog ",
	} {
		b, err := os.ReadFile(filepath.Join(dir, "completions", shell))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("the %s completion has no %q", shell, want)
		}
	}
	if out, err := exec.Command("bash", "-n", filepath.Join(dir, "completions", "bash")).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
}
