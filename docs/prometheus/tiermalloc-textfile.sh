#!/bin/sh
# tiermalloc-textfile.sh [DIR]: writes every tiermalloc process's metrics
# (`tierctl status --prom`) to DIR/tiermalloc.prom for the node exporter's
# textfile collector, atomically: a temporary file in DIR, then mv.
#
# DIR: the argument, else $TIERMALLOC_TEXTFILE_DIR, else
# /var/lib/prometheus/node-exporter (Debian's prometheus-node-exporter).
# $TIERCTL names the tierctl to run (default: tierctl from PATH);
# $TIERMALLOC_LIVE_DIR is passed on to it (default /dev/shm).
# Run it as root: each record is readable by its process's user and root only.
# On error: one line on stderr, exit 1, and DIR/tiermalloc.prom is left as it was.
set -u

dir=${1:-${TIERMALLOC_TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}}
tierctl=${TIERCTL:-tierctl}
out=$dir/tiermalloc.prom
tmp=

die() {
  echo "tiermalloc-textfile: $*" >&2
  exit 1
}

trap '[ -n "$tmp" ] && rm -f "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

[ -d "$dir" ] || die "$dir is not a directory"
# Not *.prom: the collector never reads a half-written file.
tmp=$(mktemp "$dir/.tiermalloc.prom.XXXXXX" 2>/dev/null) || die "cannot create a file in $dir"
# stderr to $err, stdout to the file.
err=$("$tierctl" status --prom 2>&1 >"$tmp")
rc=$?
if [ "$rc" -ne 0 ]; then
  msg=$(printf '%s\n' "$err" | head -n 1)
  die "$tierctl status --prom failed (exit $rc)${msg:+: $msg}"
fi
# tierctl exits 0 even when a write fails: a whole file is non-empty and
# ends with a newline ($(...) drops a trailing newline, so "" means one).
[ -s "$tmp" ] && [ -z "$(tail -c 1 "$tmp")" ] || die "$tierctl status --prom wrote a truncated file"
# The node exporter may run as another user (Debian: prometheus).
chmod 0644 "$tmp" || die "cannot chmod $tmp"
mv -f "$tmp" "$out" || die "cannot rename $tmp to $out"
tmp=
exit 0
