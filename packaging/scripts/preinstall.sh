#!/bin/sh
# Before the files are unpacked, in both packages (muster and muster-agent):
# the muster system user and group, which own /var/lib/muster/core (the
# core runs as muster) and may read /etc/muster. Kept on upgrades.
set -e
if ! getent group muster >/dev/null; then
	groupadd --system muster
fi
if ! getent passwd muster >/dev/null; then
	shell=/usr/sbin/nologin
	[ -x "$shell" ] || shell=/sbin/nologin
	useradd --system --gid muster --home-dir /var/lib/muster --no-create-home \
		--shell "$shell" --comment "muster core and agent" muster
fi
