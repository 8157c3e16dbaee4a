#!/bin/sh
# After the files of muster are unpacked: the owners that name the
# muster user (set here too, as the user was made in this same
# transaction), systemd told of the unit and, on an upgrade, the unit
# restarted if it runs (try-restart never starts a stopped one); on a first
# install only, what to edit next. dpkg runs this with "configure" and the
# version it upgrades from (none on a first install), rpm with the number
# of versions installed with this one (1 on a first install).
set -e
upgrade=false
if [ "$1" = configure ] && [ -n "$2" ]; then upgrade=true; fi
if [ "$1" -ge 2 ] 2>/dev/null; then upgrade=true; fi
# /var/lib/muster is root's (earlier releases gave it to muster); below it,
# /var/lib/muster/core is the core's (the muster user) and
# /var/lib/muster/agent root's, which runs the agent: the agent refuses a
# data directory another user owns.
chown root:root /var/lib/muster
chmod 0755 /var/lib/muster
chown muster:muster /var/lib/muster/core
chmod 0700 /var/lib/muster/core
chown root:muster /etc/muster
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if [ "$upgrade" = true ]; then
		systemctl try-restart muster-core.service || true
	fi
fi
if [ "$upgrade" = true ] || { [ "$1" != configure ] && [ "$1" != 1 ]; }; then
	exit 0
fi
cat <<'NOTE'
muster is installed: /usr/bin/muster (the core, the client and every other
command), the unit muster-core (not enabled), /etc/muster/core.yaml, data in
/var/lib/muster/core.
  On the core, edit /etc/muster/core.yaml: api.addr and api.tls, agents_tls,
  clusters, store; then: systemctl enable --now muster-core
  (the first admin token is written to /var/lib/muster/core/admin.token).
  On each node, install the muster-agent package.
See docs/operations.md in muster's repository.
NOTE
