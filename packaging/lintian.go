package main

import (
	"fmt"
	"strings"
)

// lintianOverrides is /usr/share/lintian/overrides/<package> of p's .deb:
// the tags of Debian's lintian the package draws on purpose, each with
// the reason on the line above it (TestPackageDebsAreLintianClean runs
// lintian on both .debs and fails on any error or warning, and on an
// override that matches nothing).
func lintianOverrides(p pkg) string {
	var b strings.Builder
	add := func(why, tag string) {
		fmt.Fprintf(&b, "# %s\n%s: %s\n", why, p.name, tag)
	}
	add("The packages are built from muster's releases by nfpm, not from a Debian source package: "+
		"the changes are in CHANGELOG.md of the repository (the Homepage), no changelog.gz.",
		"no-changelog")
	add("The scripts are the .deb's and the .rpm's, built without debhelper (no deb-systemd-invoke on RPM systems): "+
		"they call systemctl only when systemd runs, daemon-reload, try-restart on an upgrade (never a start) "+
		"and disable --now on a remove.",
		"maintainer-script-calls-systemctl")
	add("The configuration may hold secrets (a gossip key file's path, an enrollment token): "+
		"root and the muster group read it, nobody else.",
		"non-standard-dir-perm 0750 != 0755 [etc/muster/]")
	add("As its directory: the muster group reads it, nobody else.",
		fmt.Sprintf("non-standard-file-perm 0640 != 0644 [%s]", strings.TrimPrefix(etcDir, "/")+"/"+p.config))
	add("The data directory holds the private key and the queue: its owner only, "+
		"and the program refuses a directory others may read.",
		fmt.Sprintf("non-standard-dir-perm 0700 != 0755 [%s/]", strings.TrimPrefix(p.state, "/")))
	return b.String()
}
