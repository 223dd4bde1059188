#!/bin/sh
# Reading a trajectory through a trajfs mount, against the alternatives.
#
#   bench/bench_mount.sh [CORPUS_DIR [ARCHIVE]]
#
# CORPUS_DIR (default $TRAJFS_CORPUS; made at first use, see
# bench_corpus in benchlib.sh) is packed once into
# ARCHIVE (default $TMPDIR/trajfs-bench-<name>.traj; rebuilt when older
# than the corpus). Then, best of $BENCH_REPEAT runs (default 3) each:
#
#   cat original   cold (page cache dropped) and warm `cat` of the files
#   extract        cold `trajpack extract` of the archive into a tmpfs
#                  directory (the nearest to /dev/null for a whole tree)
#   mount cold     fresh mount, page cache dropped, `cat` of every file in
#                  step order (the daemon's cache starts empty)
#   mount warm     the same again on that mount (kernel page cache)
#   first byte     fresh mount, page cache dropped: open the last
#                  checkpoint, read its header and the first byte of its
#                  last tensor
#
# Prints figures and ratios, no thresholds. Needs root (drop_caches) and
# the built trajfs and trajpack (BUILDDIR, default the checkout).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3
corpus=${1:-${TRAJFS_CORPUS:-}}
archive=${2:-${TMPDIR:-/tmp}/trajfs-bench-$(basename "$corpus").traj}
repeat=${BENCH_REPEAT:-3}

. "$here/bench/benchlib.sh"
bench_init bench_mount
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
bench_corpus "$corpus"
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"

shm=$(mktemp -d /dev/shm/trajfs-bench.XXXXXX 2> /dev/null || mktemp -d "$work/extract.XXXXXX")
bench_remove=$shm

name=$(basename "$corpus")
# Every file of the corpus in step order (natural sort), as archive paths.
files=$(cd "$corpus" && find . -type f | sed 's|^\./||' | sort -V)
bytes=$(cd "$corpus" && du -cb $files | tail -1 | cut -f1)

if [ ! -f "$archive" ] || [ -n "$(find "$corpus" -newer "$archive" | head -1)" ]; then
    echo "packing $corpus into $archive ..."
    rm -f "$archive"
    t0=$(now)
    "$TRAJPACK" create -q "$archive" "$corpus" || die "trajpack create failed"
    echo "packed in $(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }') s"
fi

mount_fresh() {
    mount_daemon "$TRAJFS" "$archive" "$mnt" -f
}

cat_original() {
    (cd "$corpus" && cat $files > /dev/null)
}

cat_mount() {
    (cd "$mnt/$name" && cat $files > /dev/null)
}

extract() {
    rm -rf "$shm/out"
    mkdir "$shm/out"
    "$TRAJPACK" extract -q "$archive" -C "$shm/out"
}

last_ckpt=$(echo "$files" | grep -v optim | grep '\.safetensors$' | tail -1)
first_byte() {
    "$PYTHON" - "$mnt/$name/$last_ckpt" <<'PY'
import json, os, struct, sys, time
t0 = time.perf_counter()
fd = os.open(sys.argv[1], os.O_RDONLY)
(n,) = struct.unpack("<Q", os.pread(fd, 8, 0))
header = json.loads(os.pread(fd, n, 8))
begin = max(t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")
assert len(os.pread(fd, 1, 8 + n + begin)) == 1
print(f"{time.perf_counter() - t0:.4f}")
PY
}

cold_cat="" warm_cat="" cold_extract="" cold_mount="" warm_mount="" ttfb=""
for _ in $(seq "$repeat"); do
    drop_caches
    t=$(timed cat_original) || die "cat of the originals failed"
    cold_cat="$cold_cat $t"
    t=$(timed cat_original) || die "cat of the originals failed"
    warm_cat="$warm_cat $t"
    drop_caches
    t=$(timed extract) || die "trajpack extract failed"
    cold_extract="$cold_extract $t"
    rm -rf "$shm/out"
    mount_fresh
    drop_caches
    t=$(timed cat_mount) || die "reading through the mount failed: $(cat "$work/daemon.log")"
    cold_mount="$cold_mount $t"
    t=$(timed cat_mount) || die "reading through the mount failed"
    warm_mount="$warm_mount $t"
    unmount
    mount_fresh
    drop_caches
    t=$(first_byte) || die "reading the last tensor failed"
    ttfb="$ttfb $t"
    unmount
done

# The decode count of one cold read (the daemon logs it at unmount).
mount_fresh
drop_caches
cat_mount || die "reading through the mount failed"
unmount
decoded=$(sed -n 's/.*unmounted; \([0-9]*\) blobs decoded.*/\1/p' "$work/daemon.log")
blobs=$("$TRAJPACK" list --blobs "$archive" | awk -F'\t' 'NR > 1 { print $1 }' | sort -u | wc -l)

rate() { # SECONDS -> MB/s
    echo "$bytes $1" | awk '{ printf "%.0f", $1 / $2 / 1e6 }'
}
ratio() {
    echo "$1 $2" | awk '{ printf "%.2f", $2 / $1 }'
}
show() { # LABEL RUNS
    _b=$(best $2)
    printf '%-34s %8.3f s %7s MB/s   (runs:%s)\n' "$1" "$_b" "$(rate "$_b")" "$2"
}

echo
echo "corpus $corpus: $(echo "$files" | wc -l) files, $bytes bytes"
echo "archive $archive: $(sizes_text "$archive"); $(nproc) CPUs; best of $repeat runs"
echo
show "cat original, cold" "$cold_cat"
show "cat original, warm (page cache)" "$warm_cat"
show "trajpack extract, cold (to tmpfs)" "$cold_extract"
show "mount: cat, cold" "$cold_mount"
show "mount: cat again, warm" "$warm_mount"
printf '%-34s %8.3f s   (runs:%s)\n' "first byte of last tensor, cold" "$(best $ttfb)" "$ttfb"
echo
echo "mount cold / extract throughput:     $(ratio "$(best $cold_mount)" "$(best $cold_extract)")"
echo "mount warm / cat warm throughput:    $(ratio "$(best $warm_mount)" "$(best $warm_cat)")"
echo "mount cold / cat cold throughput:    $(ratio "$(best $cold_mount)" "$(best $cold_cat)")"
echo "blobs decoded in a cold read: $decoded of $blobs in the archive"
