package main

import (
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/goreleaser/nfpm/v2/files"
)

// A docsWriter writes the man pages (dir/man1/*.1) and completion scripts
// (dir/completions/{bash,zsh,fish}) of the program name; source is the man
// pages' footer.
type docsWriter func(name, dir, source string) error

// goRunDocs is the docsWriter of the repository at root: the program's
// hidden gendocs command, in a build for this machine with the gendocs tag
// (cmd/internal/gendocs), so that the arm64 packages get them too and the
// binaries packaged carry none of it.
func goRunDocs(root string, flags ...string) docsWriter {
	return func(name, dir, source string) error {
		args := append(append([]string{"run", "-tags", "gendocs"}, flags...), "./cmd/"+name, "gendocs", dir, source)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go run -tags gendocs ./cmd/%s gendocs: %w\n%s", name, err, out)
		}
		return nil
	}
}

// writeDocs writes the docs of each package into staging/<package> and
// gzips its man pages there (staging/<package>/man1/*.1.gz, as Debian
// installs them). A page of muster that muster-agent also has (those of
// `muster agent`, whose commands and flags are muster-agent's) is left to
// muster-agent: no file is in both packages.
func writeDocs(staging string, pkgs []pkg, docs docsWriter, version string) error {
	held := map[string]string{}           // man page → package
	for i := len(pkgs) - 1; i >= 0; i-- { // muster-agent first: it keeps its pages
		p := pkgs[i]
		dir := filepath.Join(staging, p.name)
		if err := docs(p.name, dir, p.name+" "+packageVersion(version)); err != nil {
			return err
		}
		pages, err := filepath.Glob(filepath.Join(dir, "man1", "*.1"))
		if err != nil {
			return err
		}
		if len(pages) == 0 {
			return fmt.Errorf("%s: no man page written", p.name)
		}
		for _, page := range pages {
			name := filepath.Base(page)
			if _, ok := held[name]; ok {
				if err := os.Remove(page); err != nil {
					return err
				}
				continue
			}
			held[name] = p.name
			if err := gzipFile(page); err != nil {
				return err
			}
		}
	}
	return nil
}

// gzipFile replaces path with path.gz, at the best compression and with
// no name or time in its header (gzip -9n: the same page makes the same
// file).
func gzipFile(path string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path + ".gz")
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := zw.Write(text); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(path)
}

// Where the completion scripts go, per shell: bash's is the same
// everywhere; zsh reads vendor-completions on Debian and site-functions on
// rpm distributions; fish's vendor directory is the same.
func completionPath(shell, name, format string) string {
	switch shell {
	case "bash":
		return "/usr/share/bash-completion/completions/" + name
	case "zsh":
		if format == "rpm" {
			return "/usr/share/zsh/site-functions/_" + name
		}
		return "/usr/share/zsh/vendor-completions/_" + name
	default:
		return "/usr/share/fish/vendor_completions.d/" + name + ".fish"
	}
}

// docContents are the man pages and completion scripts of p that
// writeDocs left in staging/<p.name>, for format.
func docContents(staging string, p pkg, format string) (files.Contents, error) {
	dir := filepath.Join(staging, p.name)
	pages, err := filepath.Glob(filepath.Join(dir, "man1", "*.1.gz"))
	if err != nil {
		return nil, err
	}
	slices.Sort(pages)
	attrs := func() *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: 0o644}
	}
	var c files.Contents
	for _, page := range pages {
		c = append(c, &files.Content{Source: page, Destination: manDir + "/" + filepath.Base(page), FileInfo: attrs()})
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		src := filepath.Join(dir, "completions", shell)
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("%s: no %s completion: %w", p.name, shell, err)
		}
		c = append(c, &files.Content{Source: src, Destination: completionPath(shell, p.name, format), FileInfo: attrs()})
	}
	return c, nil
}
