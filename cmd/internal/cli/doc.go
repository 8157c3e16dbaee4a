// Package cli is what muster's binaries (cmd/muster and cmd/muster-agent)
// share on the command line: loading a configuration from its file,
// MUSTER_* environment variables and flags, exit codes (2 for usage and
// configuration errors), the process logger, the version command and how
// an error line is printed. With cmd/muster and cmd/muster-agent it is the
// only reader of configuration sources (docs/architecture.md).
package cli
