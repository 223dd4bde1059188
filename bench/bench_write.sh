#!/bin/sh
# Writing a trajectory into an archive, three ways, in one run:
#
#   cp       `cp -r` of the corpus into a read-write trajfs mount of a new
#            archive (every close commits, durable, before cp goes on)
#   add      `trajpack create` of the same files (the same encoder, no FUSE)
#   zstd -3  `zstd -3 -T0` of each file, then a sync (the general-purpose
#            baseline)
#
#   bench/bench_write.sh [CORPUS_DIR]
#
# CORPUS_DIR defaults to /work/corpus-data/default; its files are read once
# first, so every method starts with them in the page cache. Prints the
# time, the rate (corpus bytes per second) and the stored size and ratio
# of each method; no thresholds. Needs FUSE and the built trajfs and
# trajpack (BUILDDIR, default the checkout); the work files go to TMPDIR.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
builddir=${BUILDDIR:-$here}
TRAJFS=$builddir/trajfs
TRAJPACK=$builddir/trajpack
corpus=${1:-/work/corpus-data/default}

die() {
    echo "bench_write: $*" >&2
    exit 1
}
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
[ -d "$corpus" ] || die "no corpus at $corpus"
command -v zstd > /dev/null || die "zstd not found"

work=$(mktemp -d "${TMPDIR:-/tmp}/trajfs-bench-write.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt" "$work/zstd"
daemon=""
cleanup() {
    if awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; then
        fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
    fi
    [ -z "$daemon" ] || { kill "$daemon" 2> /dev/null; wait "$daemon" 2> /dev/null; } || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

now() {
    date +%s.%N
}

# Bytes of the regular files below a directory.
file_bytes() {
    find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

bytes=$(file_bytes "$corpus")
files=$(find "$corpus" -type f | wc -l)
find "$corpus" -type f -exec cat {} + > /dev/null

# report METHOD SECONDS STORED_BYTES
report() {
    awk -v m="$1" -v t="$2" -v s="$3" -v b="$bytes" 'BEGIN {
        printf "%-8s %8.1f s %9.1f MB/s %10.1f MB %7.2fx\n", m, t, b / t / 1e6, s / 1e6, b / s }'
}

echo "corpus $corpus: $files files, $(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1e6 }'), $(nproc) CPUs"
printf '%-8s %10s %14s %13s %8s\n' method time rate stored ratio

# cp into a read-write mount
"$TRAJFS" "$work/cp.traj" "$mnt" -f -o rw 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do
    awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo && break
    kill -0 "$daemon" 2> /dev/null || { cat "$work/daemon.log" >&2; die "trajfs did not mount"; }
    sleep 0.05
done
t0=$(now)
cp -r "$corpus" "$mnt/" || die "cp into the mount failed"
t1=$(now)
fusermount3 -u "$mnt"
wait "$daemon" || die "trajfs exited with status $?"
daemon=""
report cp "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(stat -c %s "$work/cp.traj")"

# trajpack create
t0=$(now)
"$TRAJPACK" create -q "$work/add.traj" "$corpus" || die "trajpack create failed"
t1=$(now)
report add "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(stat -c %s "$work/add.traj")"

# zstd -3 of each file
t0=$(now)
(cd "$corpus" && find . -type f) | while IFS= read -r f; do
    mkdir -p "$work/zstd/$(dirname "$f")"
    zstd -q -3 -T0 "$corpus/$f" -o "$work/zstd/$f.zst" || die "zstd of $f failed"
done
sync -f "$work/zstd"
t1=$(now)
report "zstd -3" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(file_bytes "$work/zstd")"

# The two archives hold the same files.
"$TRAJPACK" list "$work/cp.traj" | LC_ALL=C sort > "$work/cp.list"
"$TRAJPACK" list "$work/add.traj" | LC_ALL=C sort > "$work/add.list"
cmp -s "$work/cp.list" "$work/add.list" || die "the cp and add archives list other files"
