// Command packaging builds muster's .deb and .rpm packages with nfpm
// (docs/operations.md, "Packages"): the binary as /usr/bin/muster, both
// systemd units, the example configurations as configuration files under
// /etc/muster, a muster system user and group made by the scripts in
// scripts/, and /var/lib/muster owned by it. `make package` runs it once
// per architecture; the e2e tests run it to install the .deb they build.
//
//	go run ./packaging -binary dist/muster-linux-amd64 -arch amd64 -version v1.2.0 -out dist
//
// It reads configs/ and packaging/scripts/ under -root (default: the
// current directory, the repository's root for `make package`).
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

// Where the package puts things.
const (
	binPath  = "/usr/bin/muster"
	unitDir  = "/usr/lib/systemd/system"
	etcDir   = "/etc/muster"
	stateDir = "/var/lib/muster"
	// manualBin is the path the units in configs/systemd start: the one a
	// manual install uses (/usr/local belongs to the administrator, never
	// to a package), rewritten to binPath in the packaged units.
	manualBin = "/usr/local/bin/muster"
)

func main() {
	binary := flag.String("binary", "", "the muster binary to package (built for -arch)")
	arch := flag.String("arch", "amd64", "amd64 or arm64")
	version := flag.String("version", "dev", "the version, such as v1.2.0 (git describe)")
	formats := flag.String("formats", "deb,rpm", "comma list of deb and rpm")
	out := flag.String("out", "dist", "the directory the packages are written to")
	root := flag.String("root", ".", "the repository's root (configs/, packaging/scripts/)")
	flag.Parse()
	if err := run(*root, *binary, *arch, *version, strings.Split(*formats, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
}

// run writes one package per format for arch, and prints their paths.
func run(root, binary, arch, version string, formats []string, out string) error {
	if binary == "" {
		return errors.New("-binary is required")
	}
	if arch != "amd64" && arch != "arm64" {
		return fmt.Errorf("-arch %q: amd64 or arm64", arch)
	}
	if _, err := os.Stat(binary); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	units, err := os.MkdirTemp("", "muster-units-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(units)
	for _, name := range []string{"muster-agent.service", "muster-core.service"} {
		b, err := os.ReadFile(filepath.Join(root, "configs", "systemd", name))
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(b), manualBin, binPath)
		if err := os.WriteFile(filepath.Join(units, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, format := range formats {
		info := packageInfo(root, binary, arch, version, units)
		p, err := nfpm.Get(format)
		if err != nil {
			return err
		}
		info = nfpm.WithDefaults(info)
		if err := nfpm.PrepareForPackager(info, format); err != nil {
			return fmt.Errorf("%s: %w", format, err)
		}
		path := filepath.Join(out, p.ConventionalFileName(info))
		if err := write(p, info, path); err != nil {
			return fmt.Errorf("%s: %w", format, err)
		}
		fmt.Println(path)
	}
	return nil
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

func packageInfo(root, binary, arch, version, units string) *nfpm.Info {
	rootOwned := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}
	}
	config := &files.ContentFileInfo{Owner: "root", Group: "muster", Mode: 0o640}
	return &nfpm.Info{
		Name:        "muster",
		Arch:        arch,
		Platform:    "linux",
		Version:     packageVersion(version),
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "muster maintainers",
		Vendor:      "muster",
		Homepage:    "https://github.com/musterhq/muster",
		Description: "Fleet operations with approvals: a core that orchestrates, an agent per node with a durable action queue.",
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: binary, Destination: binPath, FileInfo: rootOwned(0o755)},
				{Source: filepath.Join(units, "muster-agent.service"), Destination: unitDir + "/muster-agent.service", FileInfo: rootOwned(0o644)},
				{Source: filepath.Join(units, "muster-core.service"), Destination: unitDir + "/muster-core.service", FileInfo: rootOwned(0o644)},
				{Destination: etcDir, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Owner: "root", Group: "muster", Mode: 0o750}},
				{Source: filepath.Join(root, "configs", "agent.yaml"), Destination: etcDir + "/agent.yaml", Type: files.TypeConfigNoReplace, FileInfo: config},
				{Source: filepath.Join(root, "configs", "core.yaml"), Destination: etcDir + "/core.yaml", Type: files.TypeConfigNoReplace, FileInfo: config},
				{Destination: stateDir, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Owner: "muster", Group: "muster", Mode: 0o750}},
			},
			Scripts: nfpm.Scripts{
				PreInstall:  filepath.Join(root, "packaging", "scripts", "preinstall.sh"),
				PostInstall: filepath.Join(root, "packaging", "scripts", "postinstall.sh"),
				PreRemove:   filepath.Join(root, "packaging", "scripts", "preremove.sh"),
				PostRemove:  filepath.Join(root, "packaging", "scripts", "postremove.sh"),
			},
		},
	}
}
