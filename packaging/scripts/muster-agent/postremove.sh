#!/bin/sh
# After the files of muster-agent went. On dpkg's purge the agent's data (its queue, its enrolled certificate) goes too;
# /etc/muster, /var/lib/muster and the muster user and group go with the
# last of the two packages: when dpkg knows muster as neither installed
# nor removed with its configuration kept (whatever files an administrator
# moved). A plain remove, and rpm's erase, keep everything.
set -e
case "$1" in
purge)
	rm -rf /var/lib/muster/agent
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' muster 2>/dev/null || true)
	case "$status" in
	"" | ?n*)
		rm -rf /var/lib/muster /etc/muster
		if getent passwd muster >/dev/null; then userdel muster; fi
		if getent group muster >/dev/null; then groupdel muster; fi
		;;
	esac
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
