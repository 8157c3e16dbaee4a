#!/bin/sh
# Before the files of muster-agent go, when the package is removed (not
# upgraded): stop and disable the agent. dpkg says "remove", rpm 0.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now muster-agent.service >/dev/null 2>&1 || true
	fi
	;;
esac
