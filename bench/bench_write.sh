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
# CORPUS_DIR defaults to $TRAJFS_CORPUS (made at first use: bench_corpus
# in benchlib.sh); its files are read once
# first, so every method starts with them in the page cache. Prints the
# time, the rate (corpus bytes per second), the bytes the disk holds and
# their ratio for each method, and the files' size beside (an archive's
# is larger: holes where retired keyframes were given back); no
# thresholds. Needs FUSE and the built trajfs and trajpack (BUILDDIR,
# default the checkout); the work files go to TMPDIR.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${TRAJFS_CORPUS:-}}

. "$here/bench/benchlib.sh"
bench_init bench_write
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
bench_corpus "$corpus"
command -v zstd > /dev/null || die "zstd not found"

mkdir -p "$work/zstd"

# Bytes of the regular files below a directory: their sizes (%s), or
# what the disk holds for them (%b, 512-byte blocks).
file_bytes() {
    find "$1" -type f -printf "${2:-%s}\n" | awk -v unit="${2:+512}" '{ s += $1 } END { print s * (unit ? unit : 1) }'
}

bytes=$(file_bytes "$corpus")
files=$(find "$corpus" -type f | wc -l)
find "$corpus" -type f -exec cat {} + > /dev/null

# report METHOD SECONDS HELD_BYTES [APPARENT_BYTES]
report() {
    awk -v m="$1" -v t="$2" -v s="$3" -v a="${4:-}" -v b="$bytes" 'BEGIN {
        printf "%-8s %8.1f s %9.1f MB/s %10.1f MB %7.2fx", m, t, b / t / 1e6, s / 1e6, b / s
        if (a != "") printf " %10.1f MB", a / 1e6
        printf "\n" }'
}

echo "corpus $corpus: $files files, $(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1e6 }'), $(nproc) CPUs"
printf '%-8s %10s %14s %13s %8s %13s\n' method time rate held ratio "file size"

# cp into a read-write mount
mount_daemon "$TRAJFS" "$work/cp.traj" "$mnt" -f -o rw
t0=$(now)
cp -r "$corpus" "$mnt/" || die "cp into the mount failed"
t1=$(now)
unmount || die "trajfs exited with status $?"
report cp "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(held_bytes "$work/cp.traj")" \
    "$(stat -c %s "$work/cp.traj")"

# trajpack create
t0=$(now)
"$TRAJPACK" create -q "$work/add.traj" "$corpus" || die "trajpack create failed"
t1=$(now)
report add "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(held_bytes "$work/add.traj")" \
    "$(stat -c %s "$work/add.traj")"

# zstd -3 of each file
t0=$(now)
(cd "$corpus" && find . -type f) | while IFS= read -r f; do
    mkdir -p "$work/zstd/$(dirname "$f")"
    zstd -q -3 -T0 "$corpus/$f" -o "$work/zstd/$f.zst" || die "zstd of $f failed"
done
sync -f "$work/zstd"
t1=$(now)
report "zstd -3" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')" "$(file_bytes "$work/zstd" %b)" \
    "$(file_bytes "$work/zstd")"

# The two archives hold the same files.
"$TRAJPACK" list "$work/cp.traj" | LC_ALL=C sort > "$work/cp.list"
"$TRAJPACK" list "$work/add.traj" | LC_ALL=C sort > "$work/add.list"
cmp -s "$work/cp.list" "$work/add.list" || die "the cp and add archives list other files"
