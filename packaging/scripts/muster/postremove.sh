#!/bin/sh
# After the files of muster went. On dpkg's purge the core's data goes too;
# /etc/muster, /var/lib/muster and the muster user and group go with the
# last of the two packages: when muster-agent is neither installed nor
# removed with its configuration kept. A plain remove, and rpm's erase,
# keep everything.
set -e
case "$1" in
purge)
	rm -rf /var/lib/muster/core
	if [ ! -e /usr/bin/muster-agent ] && [ ! -e /etc/muster/agent.yaml ]; then
		rm -rf /var/lib/muster /etc/muster
		if getent passwd muster >/dev/null; then userdel muster; fi
		if getent group muster >/dev/null; then groupdel muster; fi
	fi
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
