#!/bin/sh
# Loading one checkpoint cold: trajfs against squashfuse and plain files.
#
#   bench/bench_coldload.sh [CORPUS_DIR [ARCHIVE [SQUASHFS]]]
#
# CORPUS_DIR (default $TRAJFS_CORPUS; made at first use, see
# bench_corpus in benchlib.sh) is packed once with
# `trajpack create` defaults into ARCHIVE (default
# $TMPDIR/trajfs-bench-<name>.traj) and with `mksquashfs DIR X -comp zstd
# -Xcompression-level 19 -b 1M` into SQUASHFS (default
# $TMPDIR/trajfs-bench-<name>.sqfs); each is rebuilt when older than the
# corpus. TRAJPACK_CREATE_ARGS adds options to that `trajpack create`.
#
# Three files are loaded: the latest weights, the latest optimizer state
# and the weights of the middle checkpoint. For each, best of
# $BENCH_REPEAT runs (default 3), every run measuring all of these side
# by side, the page cache dropped before each:
#
#   trajfs       fresh mount, `cat FILE > /dev/null`
#   squashfuse   fresh squashfuse mount of SQUASHFS, the same
#   plain file   `cat` of the original
#   extract -O   `trajpack extract -O ARCHIVE FILE > /dev/null`, wall and
#                CPU (user + system) seconds
#
# and the bytes each daemon read from the disk per byte delivered (its
# read_bytes in /proc/PID/io). Prints figures and ratios, no thresholds.
# Needs root (drop_caches), squashfuse and mksquashfs (Debian:
# squashfs-tools squashfuse), and the built trajfs and trajpack (BUILDDIR,
# default the checkout).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${TRAJFS_CORPUS:-}}
name=$(basename "$corpus")
archive=${2:-${TMPDIR:-/tmp}/trajfs-bench-$name.traj}
squashfs=${3:-${TMPDIR:-/tmp}/trajfs-bench-$name.sqfs}
repeat=${BENCH_REPEAT:-3}

. "$here/bench/benchlib.sh"
bench_cold_init bench_coldload "$squashfs"

if stale "$archive"; then
    echo "packing $corpus into $archive ..."
    rm -f "$archive"
    # shellcheck disable=SC2086 # options, split on purpose
    "$TRAJPACK" create -q ${TRAJPACK_CREATE_ARGS:-} "$archive" "$corpus" ||
        die "trajpack create failed"
fi

weights=$(cd "$corpus" && find . -name '*.safetensors' ! -name '*optim*' | sed 's|^\./||' | sort -V)
latest=$(echo "$weights" | tail -1)
middle=$(echo "$weights" | sed -n "$(( ($(echo "$weights" | wc -l) + 1) / 2 ))p")
optim=$(cd "$corpus" && find . -name '*optim*.safetensors' | sed 's|^\./||' | sort -V | tail -1)
[ -n "$latest" ] && [ -n "$optim" ] || die "$corpus holds no weights and optimizer files"

# extract_cold FILE: "WALL CPU" seconds of a cold `trajpack extract -O`.
extract_cold() {
    drop_caches
    _t0=$(now)
    _cpu=$( { /usr/bin/time -f '%U %S' "$TRAJPACK" extract -O "$archive" "$name/$1" > /dev/null; } 2>&1 |
            tail -1 | awk '{ print $1 + $2 }')
    echo "$(now) $_t0 $_cpu" | awk '{ printf "%.4f %.2f", $1 - $2, $3 }'
}

# One file: every run measures all the readers, one after the other.
bench_file() {
    _f=$1 _tf="" _sq="" _cat="" _ex="" _cpu="" _tfb=0 _sqb=0
    for _ in $(seq "$repeat"); do
        set -- $(through_mount "$name/$_f" mount_trajfs "$archive")
        _tf="$_tf $1" _tfb=$2
        set -- $(through_mount "$_f" mount_squashfuse "$squashfs")
        _sq="$_sq $1" _sqb=$2
        drop_caches
        _cat="$_cat $(timed read_file "$corpus/$_f")"
        set -- $(extract_cold "$_f")
        _ex="$_ex $1" _cpu="$_cpu $2"
    done
    _size=$(stat -c %s "$corpus/$_f")
    _t=$(best $_tf) _s=$(best $_sq) _c=$(best $_cat)
    echo
    echo "$_f ($_size bytes)"
    printf '  %-22s %7.3f s  %5.2fx squashfuse  %5.2f B read/B  (runs:%s)\n' "trajfs" "$_t" \
        "$(echo "$_t $_s" | awk '{ print $1 / $2 }')" "$(echo "$_tfb $_size" | awk '{ print $1 / $2 }')" "$_tf"
    printf '  %-22s %7.3f s  %5.2fx squashfuse  %5.2f B read/B  (runs:%s)\n' "squashfuse (zstd -19)" "$_s" \
        1 "$(echo "$_sqb $_size" | awk '{ print $1 / $2 }')" "$_sq"
    printf '  %-22s %7.3f s  %5.2fx squashfuse                 (runs:%s)\n' "plain file (cat)" "$_c" \
        "$(echo "$_c $_s" | awk '{ print $1 / $2 }')" "$_cat"
    printf '  %-22s %7.3f s  %5.2fx squashfuse  %5s s CPU      (runs:%s)\n' "trajpack extract -O" \
        "$(best $_ex)" "$(echo "$(best $_ex) $_s" | awk '{ print $1 / $2 }')" "$(best $_cpu)" "$_ex"
}

echo "corpus $corpus; $(nproc) CPUs; best of $repeat runs, page cache dropped before each read"
echo "archive $archive: $(sizes_text "$archive")"
echo "squashfs $squashfs: $(sizes_text "$squashfs")"
for f in "$latest" "$optim" "$middle"; do
    bench_file "$f"
done
