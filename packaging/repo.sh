#!/bin/sh
# repo.sh builds the package repositories of `make repo` from the packages
# `make package` wrote: an apt repository (reprepro) and a yum repository
# (createrepo_c), both signed with one OpenPGP key (gpg).
#
#   packaging/repo.sh DIST OUT GNUPGHOME KEY
#
# DIST holds the .deb and .rpm files (every version found goes in: apt and
# yum pick the newest; either format may be missing, and its repository
# then is); OUT is rewritten from scratch, and only when it is absent, empty
# or marked as written by this script (OUT/.muster-repo): it is built in a
# directory beside it and moved into its place only once complete, so a
# failed build leaves the old repository served as it was.
#
#   OUT/apt/     dists/stable/{InRelease,Release,Release.gpg}, pool/: the apt
#                repository, suite "stable", component "main", amd64 and arm64
#   OUT/yum/     repodata/ (repomd.xml signed as repomd.xml.asc), the .rpm
#                files (each signed, when rpmsign is there), muster.repo
#   OUT/muster-archive-keyring.gpg   the public key, binary, for apt's signed-by
#   OUT/muster-archive-keyring.asc   the same, armored, for rpm --import
#   OUT/.muster-repo                 the marker that lets the next run replace OUT
#
# KEY is the signing key's fingerprint in GNUPGHOME. It never installs a
# system package: when a tool is missing it says which and stops.
set -eu
if [ $# -ne 4 ]; then
	echo "usage: $0 DIST OUT GNUPGHOME KEY" >&2
	exit 2
fi
dist=$1 out=$2 key=$4
GNUPGHOME=$3
export GNUPGHOME

missing=
for tool in reprepro:reprepro createrepo_c:createrepo-c gpg:gpg dpkg-deb:dpkg; do
	command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
	echo "make repo needs:$missing (for example: sudo apt-get install$missing)" >&2
	exit 1
fi
debs=false rpms=false
set -- "$dist"/*.deb
if [ -e "$1" ]; then debs=true; fi
set -- "$dist"/*.rpm
if [ -e "$1" ]; then rpms=true; fi
if [ $debs = false ] && [ $rpms = false ]; then
	echo "no .deb or .rpm in $dist: run make package first" >&2
	exit 1
fi
gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 || {
	echo "no secret key $key in $GNUPGHOME" >&2
	exit 1
}

# OUT is replaced whole: only when it is absent, empty or marked as one this
# script wrote. A directory that merely holds a keyring (a web root serving
# it) is not.
if [ -L "$out" ]; then
	echo "$out is a symbolic link: give the directory it points to" >&2
	exit 1
fi
if [ -e "$out" ]; then
	if [ ! -d "$out" ] || { [ -n "$(ls -A "$out")" ] && [ ! -f "$out/.muster-repo" ]; }; then
		echo "$out is not a repository make repo wrote (no $out/.muster-repo): not replacing it" >&2
		exit 1
	fi
fi
# Built beside OUT (same file system), moved into its place when complete.
parent=$(dirname "$out")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.muster-repo.new.XXXXXX")
old=
trap 'rm -rf "$tmp"; [ -z "$old" ] || [ -e "$out" ] || mv "$old" "$out"' EXIT
trap 'exit 1' HUP INT TERM
chmod 755 "$tmp"
gpg --batch --yes --export "$key" >"$tmp/muster-archive-keyring.gpg"
gpg --batch --yes --armor --export "$key" >"$tmp/muster-archive-keyring.asc"

# apt: one suite, stable. reprepro keeps one version of a package per
# architecture: the .debs go in oldest first, so the newest stays.
if [ $debs = true ]; then
	mkdir -p "$tmp/apt/conf"
	cat >"$tmp/apt/conf/distributions" <<EOF
Origin: muster
Label: muster
Suite: stable
Codename: stable
Architectures: amd64 arm64
Components: main
Description: muster, fleet operations with approvals
SignWith: $key
EOF
	# (one path a line, after its version and a tab: paths may hold spaces)
	for d in "$dist"/*.deb; do
		v=$(dpkg-deb -f "$d" Version)
		printf '%s\t%s\n' "$v" "$d"
	done | sort -V | cut -f2- >"$tmp/debs"
	while IFS= read -r deb; do
		reprepro --silent -b "$tmp/apt" includedeb stable "$deb"
	done <"$tmp/debs"
	rm -rf "$tmp/debs" "$tmp/apt/conf" "$tmp/apt/db"
fi

# yum: the .rpm files signed (rpmsign, of Debian's rpm package), the
# metadata made, repomd.xml signed beside it.
if [ $rpms = true ]; then
	mkdir -p "$tmp/yum"
	cp "$dist"/*.rpm "$tmp/yum/"
	if command -v rpmsign >/dev/null; then
		# (rpmsign warns of a missing terminal: its output is shown on failure only)
		if ! said=$(rpmsign --addsign --define "_gpg_name $key" --define "_gpg_path $GNUPGHOME" \
			--define "__gpg $(command -v gpg)" "$tmp"/yum/*.rpm 2>&1); then
			echo "$said" >&2
			exit 1
		fi
	else
		echo "repo: no rpmsign (apt-get install rpm): the .rpm files are not signed, only repomd.xml" >&2
	fi
	createrepo_c --quiet "$tmp/yum"
	gpg --batch --yes --local-user "$key" --armor --detach-sign "$tmp/yum/repodata/repomd.xml"
	cat >"$tmp/yum/muster.repo" <<'EOF'
# /etc/yum.repos.d/muster.repo: baseurl is where OUT/yum is served.
[muster]
name=muster
baseurl=https://packages.example.com/yum
enabled=1
gpgcheck=1
repo_gpgcheck=1
gpgkey=https://packages.example.com/muster-archive-keyring.asc
EOF
fi

# Complete: the marker, then the swap (the old one moved aside first, put
# back by the EXIT trap should the move of the new one fail).
: >"$tmp/.muster-repo"
if [ -e "$out" ]; then
	old="$tmp.old"
	mv "$out" "$old"
fi
mv "$tmp" "$out"
if [ -n "$old" ]; then
	rm -rf "$old"
	old=
fi
if [ $debs = true ]; then echo "$out/apt"; fi
if [ $rpms = true ]; then echo "$out/yum"; fi
echo "$out/muster-archive-keyring.gpg"
