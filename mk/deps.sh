#!/bin/sh
# Installs the Debian packages given as arguments that are not installed yet.
# A no-op (and no apt-get call) when everything is there.
missing=
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
