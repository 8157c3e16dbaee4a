#!/bin/sh
# After the files went. On dpkg's purge the data, the configuration and the
# muster user and group go too (no file is left that the user owns); a plain
# remove, and rpm's erase, keep them.
set -e
case "$1" in
purge)
	rm -rf /var/lib/muster /etc/muster
	if getent passwd muster >/dev/null; then userdel muster; fi
	if getent group muster >/dev/null; then groupdel muster; fi
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
