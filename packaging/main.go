// Command packaging builds muster's .deb and .rpm packages with nfpm
// (docs/operations.md, "Packages"). There are two, which one machine may
// both install:
//
//   - muster: the one binary as /usr/bin/muster (the core, the client and
//     every other command), muster-core.service and /etc/muster/core.yaml;
//   - muster-agent: the agent-only binary as /usr/bin/muster-agent, the
//     one every node installs, muster-agent.service and
//     /etc/muster/agent.yaml.
//
// No file is in both. Both make the muster system user and group (the
// shared scripts/preinstall.sh) and hold the directories /etc/muster
// (root:muster) and /var/lib/muster (root's); each holds its own state
// directory below it, /var/lib/muster/core (the muster user's, which runs the
// core) and /var/lib/muster/agent (root's, which runs the agent, mode 0700);
// their other scripts are under
// scripts/<package>/, and a purge removes the directories and the user
// with the last of the two. Each also holds its copyright file
// (copyright.go), its program's man pages and completion scripts
// (docs.go), and depends on what its binary links (depends.go); its
// postinst try-restarts its unit on an upgrade. `make package` runs it once per architecture;
// the e2e tests run it to install the .debs they build.
//
//	go run ./packaging -binary dist/muster-linux-amd64 -agent-binary dist/muster-agent-linux-amd64 -arch amd64 -version v1.2.0 -out dist
//
// It reads configs/, packaging/scripts/ and LICENSE under -root (default:
// the current directory, the repository's root for `make package`); the
// man pages and completions are those of the programs of the module it
// runs in (its current directory: `go run ./packaging` from the root).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Where the packages put things.
const (
	binDir   = "/usr/bin"
	unitDir  = "/usr/lib/systemd/system"
	etcDir   = "/etc/muster"
	stateDir = "/var/lib/muster"
	docDir   = "/usr/share/doc"
	manDir   = "/usr/share/man/man1"
	// lintianDir holds each .deb's lintian overrides (lintian.go).
	lintianDir = "/usr/share/lintian/overrides"
	// manualBinDir is where the units in configs/systemd find the binaries:
	// the directory a manual install uses (/usr/local belongs to the
	// administrator, never to a package), rewritten to binDir in the
	// packaged units.
	manualBinDir = "/usr/local/bin"
)

// maintainer is the packages' Maintainer: a name and an address, as
// Debian's control files require (lintian's malformed-contact). The
// project publishes no mail address: the address is in the reserved
// .invalid domain, and the Homepage, its repository, is where to write.
const maintainer = "muster maintainers <maintainers@musterhq.invalid>"

// A pkg is one of the two packages. Its binary is installed as
// binDir/name.
type pkg struct {
	name string
	// description is its synopsis (the first line: short, no leading
	// article, as Debian's control files have it; rpm's Summary) and its
	// extended description (the lines after it).
	description string
	binary      string // the file to package, built for the architecture
	unit        string // its unit, in configs/systemd
	config      string // its configuration, in configs
	// state is its data directory (its unit's --data-dir, mode 0700),
	// owned by stateOwner, the user its unit runs as.
	state, stateOwner string
}

// packages are the two packages of the binaries muster and muster-agent.
func packages(binary, agentBinary string) []pkg {
	return []pkg{
		{
			name: "muster",
			description: "fleet operations with approvals: core, client and commands\n" +
				"muster runs actions on a fleet of nodes with approvals, playbooks and\n" +
				"audit. This package holds the one binary muster: the core that\n" +
				"orchestrates (muster-core.service), the client, and every other command.\n" +
				"Each node installs the muster-agent package.",
			binary:     binary,
			unit:       "muster-core.service",
			config:     "core.yaml",
			state:      stateDir + "/core",
			stateOwner: "muster",
		},
		{
			name: "muster-agent",
			description: "agent of muster, one per node of the fleet\n" +
				"muster runs actions on a fleet of nodes with approvals, playbooks and\n" +
				"audit. This package holds its agent, muster-agent\n" +
				"(muster-agent.service): a durable action queue, its runner and a local\n" +
				"API, in a binary of its own.",
			binary:     agentBinary,
			unit:       "muster-agent.service",
			config:     "agent.yaml",
			state:      stateDir + "/agent",
			stateOwner: "root",
		},
	}
}

func main() {
	binary := flag.String("binary", "", "the muster binary to package (built for -arch)")
	agentBinary := flag.String("agent-binary", "", "the muster-agent binary to package (built for -arch)")
	arch := flag.String("arch", "amd64", "amd64 or arm64")
	version := flag.String("version", "dev", "the version, such as v1.2.0 (git describe)")
	formats := flag.String("formats", "deb,rpm", "comma list of deb and rpm")
	out := flag.String("out", "dist", "the directory the packages are written to")
	root := flag.String("root", ".", "the directory of configs/, packaging/scripts/ and LICENSE (the repository's root)")
	docsFlags := flag.String("docs-build-flags", "", "flags of the go run that writes the man pages and completions (-race reuses a race build's cache)")
	flag.Parse()
	if err := run(*root, *binary, *agentBinary, *arch, *version, strings.Split(*formats, ","), *out,
		goRunDocs(".", strings.Fields(*docsFlags)...)); err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
}

// run writes both packages in each format for arch, with the man pages and
// completion scripts docs writes, and prints their paths.
func run(root, binary, agentBinary, arch, version string, formats []string, out string, docs docsWriter) error {
	if binary == "" || agentBinary == "" {
		return errors.New("-binary and -agent-binary are required")
	}
	if arch != "amd64" && arch != "arm64" {
		return fmt.Errorf("-arch %q: amd64 or arm64", arch)
	}
	for _, b := range []string{binary, agentBinary} {
		if _, err := os.Stat(b); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	units, err := os.MkdirTemp("", "muster-units-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(units)
	copyright, err := copyrightFile(root)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(units, "copyright"), []byte(copyright), 0o644); err != nil {
		return err
	}
	pkgs := packages(binary, agentBinary)
	if err := writeDocs(units, pkgs, docs, version); err != nil {
		return err
	}
	for _, p := range pkgs {
		if err := os.WriteFile(filepath.Join(units, p.name+".lintian-overrides"), []byte(lintianOverrides(p)), 0o644); err != nil {
			return err
		}
		text, err := packagedUnit(root, p.unit)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(units, p.unit), []byte(text), 0o644); err != nil {
			return err
		}
		for _, format := range formats {
			packager, err := nfpm.Get(format)
			if err != nil {
				return err
			}
			info, err := formatInfo(root, p, arch, version, units, format)
			if err != nil {
				return fmt.Errorf("%s %s: %w", p.name, format, err)
			}
			info = nfpm.WithDefaults(info)
			if err := nfpm.PrepareForPackager(info, format); err != nil {
				return fmt.Errorf("%s %s: %w", p.name, format, err)
			}
			path := filepath.Join(out, packager.ConventionalFileName(info))
			if err := write(packager, info, path); err != nil {
				return fmt.Errorf("%s %s: %w", p.name, format, err)
			}
			fmt.Println(path)
		}
	}
	return nil
}

// packagedUnit is the unit configs/systemd/name with its binary in binDir.
func packagedUnit(root, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "configs", "systemd", name))
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll(string(b), manualBinDir+"/", binDir+"/"), nil
}

func write(p nfpm.Packager, info *nfpm.Info, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

var semverRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+`)

// packageVersion makes a version both dpkg and rpm order: git describe's
// v1.2.0 or v1.2.0-3-gabcdef stay (nfpm splits the pre-release part); a
// bare commit, or dev, becomes 0.0.0+that.
func packageVersion(v string) string {
	if semverRE.MatchString(v) {
		return v
	}
	clean := regexp.MustCompile(`[^0-9A-Za-z.]+`).ReplaceAllString(v, ".")
	return "0.0.0+" + strings.Trim(clean, ".")
}

// formatInfo is the package p in format (deb or rpm): packageInfo with
// the man pages and completion scripts writeDocs left in units, and the
// dependencies its binary's linkage computes.
func formatInfo(root string, p pkg, arch, version, units, format string) (*nfpm.Info, error) {
	info := packageInfo(root, p, arch, version, units)
	docs, err := docContents(units, p, format)
	if err != nil {
		return nil, err
	}
	info.Contents = append(info.Contents, docs...)
	l, err := readLinkage(p.binary)
	if err != nil {
		return nil, err
	}
	switch format {
	case "deb":
		info.Depends, err = debDepends(l)
	case "rpm":
		info.Depends, err = rpmRequires(l)
	}
	return info, err
}

// packageInfo is the package p; units is the directory of its packaged
// unit and of the copyright file. The directories /etc/muster and
// /var/lib/muster are in both packages, with the same owners and modes, so
// that either may be installed alone; every file, and each state
// directory, is in one.
func packageInfo(root string, p pkg, arch, version, units string) *nfpm.Info {
	rootOwned := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}
	}
	config := &files.ContentFileInfo{Owner: "root", Group: "muster", Mode: 0o640}
	scripts := filepath.Join(root, "packaging", "scripts")
	return &nfpm.Info{
		Name:        p.name,
		Arch:        arch,
		Platform:    "linux",
		Version:     packageVersion(version),
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  maintainer,
		Vendor:      "muster",
		Homepage:    homepage,
		Description: p.description,
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: p.binary, Destination: binDir + "/" + p.name, FileInfo: rootOwned(0o755)},
				{Source: filepath.Join(units, p.unit), Destination: unitDir + "/" + p.unit, FileInfo: rootOwned(0o644)},
				{Destination: etcDir, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Owner: "root", Group: "muster", Mode: 0o750}},
				{Source: filepath.Join(units, "copyright"), Destination: docDir + "/" + p.name + "/copyright", FileInfo: rootOwned(0o644)},
				{Source: filepath.Join(units, p.name+".lintian-overrides"), Destination: lintianDir + "/" + p.name, Packager: "deb", FileInfo: rootOwned(0o644)},
				{Source: filepath.Join(root, "configs", p.config), Destination: etcDir + "/" + p.config, Type: files.TypeConfigNoReplace, FileInfo: config},
				{Destination: stateDir, Type: files.TypeDir, FileInfo: rootOwned(0o755)},
				{Destination: p.state, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Owner: p.stateOwner, Group: p.stateOwner, Mode: 0o700}},
			},
			Scripts: nfpm.Scripts{
				PreInstall:  filepath.Join(scripts, "preinstall.sh"),
				PostInstall: filepath.Join(scripts, p.name, "postinstall.sh"),
				PreRemove:   filepath.Join(scripts, p.name, "preremove.sh"),
				PostRemove:  filepath.Join(scripts, p.name, "postremove.sh"),
			},
		},
	}
}
