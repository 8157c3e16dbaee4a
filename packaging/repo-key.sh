#!/bin/sh
# repo-key.sh prints the fingerprint of the throwaway signing key in
# GNUPGHOME, made first when there is none: an ed25519 key without a
# passphrase, for tests and trials of `make repo` only (a real repository
# is signed with a key kept offline: make repo REPO_GNUPGHOME=... REPO_KEY=...).
# It lives under dist/, which git ignores: never commit it.
#
#   packaging/repo-key.sh GNUPGHOME
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 GNUPGHOME" >&2
	exit 2
fi
command -v gpg >/dev/null || {
	echo "make repo needs: gpg (for example: sudo apt-get install gpg)" >&2
	exit 1
}
GNUPGHOME=$1
export GNUPGHOME
mkdir -p "$GNUPGHOME"
chmod 0700 "$GNUPGHOME"
fpr() { gpg --batch --with-colons --list-secret-keys 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }'; }
if [ -z "$(fpr)" ]; then
	gpg --batch --quiet --passphrase '' --quick-generate-key \
		'muster test repository (not for production) <repo@muster.invalid>' ed25519 sign 2y 2>/dev/null
	echo "repo: made a throwaway signing key in $GNUPGHOME (tests only)" >&2
fi
fpr
