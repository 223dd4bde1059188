#!/bin/sh
# A remote archive over loopback HTTP (lighttpd on 127.0.0.1) against the
# same archive mounted as a local file, in the same run.
#
#   bench/bench_remote.sh [CORPUS_DIR [ARCHIVE]]
#
# CORPUS_DIR (default /work/corpus-data/default) is packed once with
# `trajpack create` into ARCHIVE (default $TMPDIR/trajfs-bench-<name>.traj),
# rebuilt when older than the corpus. Prints, for each of
#
#   open        `trajpack list URL` (opening only)
#   one ckpt    a fresh mount, `cat` of the latest weights file
#   all         a fresh mount, `cat` of every file
#
# the requests and bytes fetched (TRAJFS_REMOTE_STATS) and the seconds,
# beside a fresh mount of the local file with the page cache dropped: its
# seconds and the bytes its daemon read from the disk (read_bytes).
# No disk cache (cache_dir) on the remote side: every fetch is cold.
# Figures only, no thresholds. Needs root (drop_caches), lighttpd and the
# built trajfs and trajpack (BUILDDIR, default the checkout).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
builddir=${BUILDDIR:-$here}
TRAJFS=$builddir/trajfs
TRAJPACK=$builddir/trajpack
corpus=${1:-/work/corpus-data/default}
name=$(basename "$corpus")
archive=${2:-${TMPDIR:-/tmp}/trajfs-bench-$name.traj}

die() {
    echo "bench_remote: $*" >&2
    exit 1
}
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
[ -d "$corpus" ] || die "no corpus at $corpus"
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
command -v lighttpd > /dev/null || die "needs lighttpd (apt-get install lighttpd)"

work=$(mktemp -d "${TMPDIR:-/tmp}/trajfs-remote.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt" "$work/www"
daemon="" server=""
is_mounted() {
    awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}
cleanup() {
    if is_mounted; then
        fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
    fi
    [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if [ ! -f "$archive" ] || [ -n "$(find "$corpus" -newer "$archive" -print -quit)" ]; then
    echo "packing $corpus into $archive"
    rm -f "$archive"
    "$TRAJPACK" create -q "$archive" "$corpus"
fi
ln -s "$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")" "$work/www/a.traj"
port=$(( 20000 + $(od -An -tu2 -N2 /dev/urandom | tr -d ' ') % 30000 ))
cat > "$work/lighttpd.conf" <<CONF
server.document-root = "$work/www"
server.bind = "127.0.0.1"
server.port = $port
server.follow-symlink = "enable"
server.errorlog = "$work/lighttpd.err"
CONF
lighttpd -D -f "$work/lighttpd.conf" &
server=$!
url=http://127.0.0.1:$port/a.traj
for _ in $(seq 50); do
    curl -s -o /dev/null "$url" -r 0-0 && break
    sleep 0.1
done

drop() {
    sync
    echo 3 > /proc/sys/vm/drop_caches
}
now() { date +%s.%N; }

# mount SOURCE: a fresh mount, its daemon's log in $work/log.
mount_fresh() {
    TRAJFS_REMOTE_STATS=1 "$TRAJFS" "$1" "$mnt" -f 2> "$work/log" &
    daemon=$!
    for _ in $(seq 200); do
        is_mounted && return 0
        sleep 0.02
    done
    die "mount of $1 failed: $(cat "$work/log")"
}
unmount() {
    fusermount3 -u "$mnt"
    wait "$daemon" || true
    daemon=""
}
# remote_counts: "REQUESTS BYTES" of the last remote mount or open.
remote_counts() {
    sed -n 's/.*: \([0-9]*\) requests, \([0-9]*\) bytes fetched/\1 \2/p' "$1"
}

latest=$(cd "$corpus" && ls | grep -v optim | grep safetensors | sort | tail -1)
files=$(cd "$corpus" && find . -type f | sort)

# run WHAT: cat WHAT (one file or all) through a fresh mount of each;
# prints a line.
run() {
    label=$1
    shift
    drop
    mount_fresh "$archive"
    t0=$(now)
    (cd "$mnt/$name" && cat "$@" > /dev/null)
    t1=$(now)
    disk=$(awk '/^read_bytes/ { print $2 }' "/proc/$daemon/io")
    unmount
    drop
    mount_fresh "$url"
    t2=$(now)
    (cd "$mnt/$name" && cat "$@" > /dev/null)
    t3=$(now)
    unmount
    set -- $(remote_counts "$work/log")
    awk -v l="$label" -v tl="$(echo "$t1 - $t0" | bc)" -v tr="$(echo "$t3 - $t2" | bc)" \
        -v d="$disk" -v q="$1" -v b="$2" -v oq="$open_q" -v ob="$open_b" 'BEGIN {
        printf "%-9s remote %7.3f s  %5d requests  %8.1f MB fetched | local %7.3f s  %8.1f MB read from disk | time x%.2f  bytes x%.3f\n",
            l, tr, q - oq, (b - ob) / 1e6, tl, d / 1e6, tr / tl, (b - ob) / (d > 0 ? d : 1) }'
}

drop
TRAJFS_REMOTE_STATS=1 "$TRAJPACK" list "$url" > /dev/null 2> "$work/open.log"
set -- $(remote_counts "$work/open.log")
open_q=$1 open_b=$2
commits=$("$TRAJPACK" stats --json "$archive" 2>/dev/null | grep -o '"commits": *[0-9]*' | grep -o '[0-9]*$' || echo "?")
echo "archive: $archive ($(stat -c %s "$archive") bytes, $commits commits), served by lighttpd on 127.0.0.1"
echo "open      $open_q requests, $open_b bytes fetched"
echo "(one ckpt and all: beyond the open's requests and bytes)"
run "one ckpt" "$latest"
# shellcheck disable=SC2086
run "all" $files
