package handlers

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/config"
)

// Privilege profiles (docs/operations.md, "Privilege profiles"). A kind that
// declares one runs its commands in a transient systemd unit of their own
// (systemd-run), with the profile's capabilities and writable paths; every
// other kind runs as a child of the agent, under the agent's own unit.
const (
	ProfilePackageManager = "package-manager"
	ProfileRoot           = "root"
)

// Profile is what a transient unit of a privileged kind may do.
type Profile struct {
	// Caps is the unit's capability bounding set (empty: every capability).
	Caps []string
	// ReadWritePaths are the paths the unit may write under
	// ProtectSystem=strict (empty with Caps empty: no ProtectSystem).
	ReadWritePaths []string
	// Properties are the rest of the unit's sandbox.
	Properties []string
}

// Profiles are the privilege profiles by name.
var Profiles = map[string]Profile{
	// What dpkg, apt-get and rpm do: write package files under /usr, /etc,
	// /opt, /boot and /var (their databases, caches, logs and what packages
	// ship there) with the owners, modes, set-id bits and file
	// capabilities of the archive, drop to _apt for downloads, and run
	// maintainer scripts that add users, restart services (systemctl over
	// systemd's socket, as uid 0) and stop daemons.
	ProfilePackageManager: {
		Caps: []string{
			"CAP_CHOWN",        // set the owner and group of every file unpacked
			"CAP_DAC_OVERRIDE", // write into directories and files of other users
			"CAP_FOWNER",       // chmod and utimes on files the package gave to another user
			"CAP_FSETID",       // keep set-user-id and set-group-id bits through chown and chmod
			"CAP_SETFCAP",      // file capabilities (setcap in postinst, rpm's %caps)
			"CAP_SETUID",       // apt's _apt download methods, maintainer scripts' su and runuser
			"CAP_SETGID",
			"CAP_KILL", // maintainer scripts stopping daemons; apt stopping its methods
		},
		// "-": a machine without /opt or /boot still starts the unit.
		ReadWritePaths: []string{"/usr", "/etc", "-/opt", "-/boot", "/var", "/run"},
		Properties: []string{
			"ProtectSystem=strict",
			"ProtectHome=yes",
			"PrivateTmp=yes",
			"NoNewPrivileges=yes",
			// Packages set modes from the archive; what maintainer scripts
			// create gets the usual 022, not the agent's 077.
			"UMask=0022",
			"ProtectKernelTunables=yes",
			"ProtectControlGroups=yes",
			"ProtectClock=yes",
			"ProtectHostname=yes",
			"RestrictRealtime=yes",
			"LockPersonality=yes",
			"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
			"SystemCallArchitectures=native",
		},
	},
	// A command that needs root without bounds (a kernel module, a
	// firmware update): every capability, every path; still its own unit,
	// with its own /tmp, so that it never shares the agent's.
	ProfileRoot: {
		Properties: []string{"PrivateTmp=yes", "UMask=0022"},
	},
}

// ProfileNames lists the profiles' names, sorted.
func ProfileNames() []string {
	out := make([]string, 0, len(Profiles))
	for k := range Profiles {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// properties returns the unit's properties, as systemd-run's --property
// takes them.
func (p Profile) properties() []string {
	var out []string
	if len(p.Caps) > 0 {
		out = append(out, "CapabilityBoundingSet="+strings.Join(p.Caps, " "),
			"AmbientCapabilities=")
	}
	if len(p.ReadWritePaths) > 0 {
		out = append(out, "ReadWritePaths="+strings.Join(p.ReadWritePaths, " "))
	}
	out = append(out, p.Properties...)
	// Stop reaches every process of the unit: SIGTERM, then SIGKILL.
	out = append(out, "KillMode=control-group")
	return out
}

// UnitName is the transient unit of an action's command: one per action,
// so that a second launch of it while the first runs is refused by systemd.
func UnitName(actionID string) string {
	return "muster-action-" + actionID + ".service"
}

// unitArgv is the systemd-run command line that runs argv in the action's
// transient unit under the profile, with env as its whole environment.
// With wait, systemd-run waits for the command, passes its own stdin,
// stdout and stderr to it (--pipe) and exits with its status; without,
// it returns once the unit has started, and the command lives on apart
// from the agent (restarts_agent kinds).
// props are properties added to the profile's.
func unitArgv(systemdRun, unit string, p Profile, props, env, argv []string, wait bool) []string {
	out := []string{systemdRun, "--unit=" + unit, "--collect", "--quiet",
		"--description=muster action " + strings.TrimSuffix(unit, ".service")}
	if wait {
		out = append(out, "--wait", "--pipe")
	}
	for _, prop := range append(p.properties(), props...) {
		out = append(out, "--property="+prop)
	}
	for _, kv := range env {
		out = append(out, "--setenv="+kv)
	}
	return append(append(out, "--"), argv...)
}

// validateProfile checks a kind's privileges and restarts_agent.
func (e External) validateProfile(key string, errs *config.Errors) {
	if e.Privileges != "" {
		if _, ok := Profiles[e.Privileges]; !ok {
			errs.Add(key+".privileges", "%q is not a privilege profile (%s)", e.Privileges, strings.Join(ProfileNames(), ", "))
		} else if e.User != "" {
			errs.Add(key+".user", "a kind with privileges runs as root in its own unit; drop user or privileges")
		}
	}
	if e.RestartsAgent {
		if e.Privileges == "" {
			errs.Add(key+".restarts_agent", "needs privileges (%s): the command runs in a unit of its own, apart from the agent's", strings.Join(ProfileNames(), ", "))
		}
		if len(e.Check) > 0 {
			errs.Add(key+".check", "a restarts_agent kind has no check: its result is the command's exit status")
		}
		if e.Idempotent {
			errs.Add(key+".idempotent", "a restarts_agent kind runs at most once")
		}
	}
}

// unitFor is the unit of an action's run command, or of its check.
func unitFor(actionID string, check bool) string {
	if check {
		return "muster-action-" + actionID + "-check.service"
	}
	return UnitName(actionID)
}

// envNames returns the names of env's NAME=value entries: systemd-run's
// --setenv=NAME takes the value from its own environment, so values never
// show on its command line (which every user of the host can read).
func envNames(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// unitProps are the properties of every unit of the kind's: stop gives its
// processes kill_grace between SIGTERM and SIGKILL, as the agent gives its
// children.
func (h *externalHandler) unitProps() []string {
	return []string{fmt.Sprintf("TimeoutStopSec=%dms", h.grace().Milliseconds())}
}

func (h *externalHandler) systemdRun() string {
	if h.env.SystemdRun != "" {
		return h.env.SystemdRun
	}
	return DefaultSystemdRun
}

func (h *externalHandler) systemctl() string {
	if h.env.Systemctl != "" {
		return h.env.Systemctl
	}
	return DefaultSystemctl
}

// Where systemd's programs are on Debian, Ubuntu and the RPM distributions.
const (
	DefaultSystemdRun = "/usr/bin/systemd-run"
	DefaultSystemctl  = "/usr/bin/systemctl"
)

// stopUnitAsync stops unit (SIGTERM to all its processes, SIGKILL after its
// TimeoutStopSec; systemd-run, signalled, only stops waiting) and closes the
// channel it returns once the stop is over.
func stopUnitAsync(systemctl, unit string, grace time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		stopUnitWithin(systemctl, unit, grace+time.Minute)
	}()
	return done
}

// stopUnitAndWait stops unit and waits for it to be stopped (a unit that
// no longer exists is stopped), for at most a minute.
func stopUnitAndWait(systemctl, unit string) {
	stopUnitWithin(systemctl, unit, time.Minute)
}

// stopUnitWithin runs systemctl stop, which returns once the unit is
// stopped, for at most d.
func stopUnitWithin(systemctl, unit string, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemctl, "stop", "--", unit)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	_ = cmd.Run()
}

// unitState is the unit's ActiveState as systemctl shows it ("inactive"
// for a unit systemd does not know; "" when systemctl fails).
func unitState(systemctl, unit string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemctl, "show", "-p", "ActiveState", "--value", "--", unit)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// unitRunning reports whether a unit in state may still run its command.
func unitRunning(state string) bool {
	switch state {
	case "active", "activating", "deactivating", "reloading", "refreshing":
		return true
	}
	return false
}
