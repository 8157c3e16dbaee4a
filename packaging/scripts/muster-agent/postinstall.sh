#!/bin/sh
# After the files of muster-agent are unpacked: the owners that name the
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
chown root:root /var/lib/muster/agent
chmod 0700 /var/lib/muster/agent
chown root:muster /etc/muster
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if [ "$upgrade" = true ]; then
		systemctl try-restart muster-agent.service || true
	fi
fi
if [ "$upgrade" = true ] || { [ "$1" != configure ] && [ "$1" != 1 ]; }; then
	exit 0
fi
cat <<'NOTE'
muster-agent is installed: /usr/bin/muster-agent, the unit muster-agent (not
enabled), /etc/muster/agent.yaml, data in /var/lib/muster/agent.
  Edit /etc/muster/agent.yaml: node_id, cluster_id, api.addr, and an enroll
  block or api.tls, gossip.join and gossip.key_file;
  then: systemctl enable --now muster-agent
See docs/operations.md in muster's repository.
NOTE
