// Package version holds the build's version string, set at link time.
package version

// Version is set with -ldflags "-X github.com/musterhq/muster/shared/version.Version=...".
var Version = "dev"
