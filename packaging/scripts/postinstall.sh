#!/bin/sh
# After the files are unpacked: the owners that name the muster user (set
# here too, as the user was made in this same transaction), systemd told of
# the units, and what to edit next.
set -e
chown muster:muster /var/lib/muster
chmod 0750 /var/lib/muster
chown root:muster /etc/muster
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
cat <<'NOTE'
muster is installed: /usr/bin/muster, the units muster-agent and muster-core
(not enabled), the configurations in /etc/muster, data in /var/lib/muster.
  On each node, edit /etc/muster/agent.yaml: node_id, cluster_id, api.addr
  with api.tls, gossip.join and gossip.key_file;
  then: systemctl enable --now muster-agent
  On the core, edit /etc/muster/core.yaml: api.addr and api.tls, agents_tls,
  clusters, store; then: systemctl enable --now muster-core
  (the first admin token is written to /var/lib/muster/core/admin.token).
See docs/operations.md in muster's repository.
NOTE
