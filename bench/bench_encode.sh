#!/bin/sh
# Encoding speed and memory of trajpack, next to zstd -3, in one run.
#
#   bench/bench_encode.sh [--big] [CORPUS_DIR]
#
# Four rows, from two consecutive checkpoints of CORPUS_DIR (default
# $TRAJFS_CORPUS, made at first use: bench_corpus in benchlib.sh; STEP_A
# and STEP_B, default 375 and 400): the
# bf16 weights (step-N.safetensors) and the float32 AdamW state
# (step-N.optim.safetensors), each
#
#   standalone  `trajpack create -T 1` of the first file alone
#   delta       `trajpack add -T 1` of the second file to that archive
#               (its references are decoded from the archive: the cache
#               starts empty), and, beside it, what the second file adds
#               to `trajpack create -T 1` of both (references from the
#               writer's cache, as when a run is packed or a mount is
#               written): create of both less create of the first
#
# against `zstd -3 --single-thread` of the same file. Times are CPU time
# (user + sys, less sensitive than wall time to other work on the
# machine), best of $BENCH_REPEAT runs (default 3), trajpack and zstd
# taking turns; MB/s is 10^6 file bytes per CPU second. Sizes: the
# bytes the disk holds for each archive, and the pair's against what `trajpack create` of the pair
# stored before sample-based encoding (TODAY_BF16, TODAY_F32), or
# against the archive of BASELINE (a trajpack binary) when given.
#
# --big adds the memory row: a pair of checkpoints generated here (never
# kept), one bf16 tensor of 2^31 + 12345 elements each (4.3 GB, 8.6 GB in
# all; the second the first plus small updates): peak RSS of `trajpack
# create -T 1` and `-T 2` of the pair, and of a read-write mount's daemon
# (-o threads=2) while cp writes the pair into it. Needs about 20 GB of
# free space in TMPDIR and FUSE.
#
# Prints figures, no thresholds. Needs the built trajpack (and trajfs for
# --big; BUILDDIR, default the checkout), zstd, python3 (and numpy for
# --big) and, for the mount's memory, GNU time.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3
repeat=${BENCH_REPEAT:-3}
step_a=${STEP_A:-375}
step_b=${STEP_B:-400}
# The pairs' archives before this encoder (trajpack create of steps 375
# and 400 of the default corpus).
today_bf16=${TODAY_BF16:-21435927}
today_f32=${TODAY_F32:-139104892}

big=false
if [ "${1:-}" = --big ]; then
    big=true
    shift
fi
corpus=${1:-${TRAJFS_CORPUS:-}}

. "$here/bench/benchlib.sh"
bench_init bench_encode
[ -x "$TRAJPACK" ] || die "build trajpack first (or set BUILDDIR)"
bench_corpus "$corpus"
command -v zstd > /dev/null || die "zstd not found"
[ -x "$PYTHON" ] || die "$PYTHON not found"

# cpu COMMAND...: runs it, prints its CPU seconds (user + sys, to the
# microsecond: GNU time's hundredths are too coarse here); its peak RSS
# in KiB goes to $work/rss.
cpu() {
    "$PYTHON" -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%d\n" % u.ru_maxrss)
print("%.4f" % (u.ru_utime + u.ru_stime))
sys.exit(rc)' "$work/rss" "$@" || die "$* failed"
}

min() {
    awk -v a="$1" -v b="$2" 'BEGIN { print (a < b ? a : b) }'
}

file_size() {
    stat -c %s "$1"
}

name() {
    printf 'step-%06d%s.safetensors' "$1" "$2"
}

# row LABEL SUFFIX: the standalone and delta rows of one kind of file.
row() {
    label=$1 suffix=$2
    a=$corpus/$(name "$step_a" "$suffix")
    b=$corpus/$(name "$step_b" "$suffix")
    [ -f "$a" ] && [ -f "$b" ] || die "no $a or $b"
    cat "$a" "$b" > /dev/null
    bytes_a=$(file_size "$a") bytes_b=$(file_size "$b")
    sa="" sd="" sp="" za="" zb=""
    for _ in $(seq "$repeat"); do
        rm -f "$work/s.traj" "$work/p.traj"
        sa="$sa $(cpu "$TRAJPACK" create -q -T 1 "$work/s.traj" "$a")"
        za="$za $(cpu zstd -q -f -3 --single-thread "$a" -o "$work/a.zst")"
        cp "$work/s.traj" "$work/d.traj"
        sd="$sd $(cpu "$TRAJPACK" add -q -T 1 "$work/d.traj" "$b")"
        zb="$zb $(cpu zstd -q -f -3 --single-thread "$b" -o "$work/b.zst")"
        sp="$sp $(cpu "$TRAJPACK" create -q -T 1 "$work/p.traj" "$a" "$b")"
    done
    sa=$(best $sa) sd=$(best $sd) sp=$(best $sp) za=$(best $za) zb=$(best $zb)
    inc=$(awk -v p="$sp" -v a="$sa" 'BEGIN { printf "%.3f", p - a }')
    pair=$(held_bytes "$work/p.traj")
    report "$label standalone" "$bytes_a" "$sa" "$za" "$(held_bytes "$work/s.traj")" "$(file_size "$work/a.zst")"
    report "$label delta, add" "$bytes_b" "$sd" "$zb" \
        $(($(held_bytes "$work/d.traj") - $(held_bytes "$work/s.traj"))) "$(file_size "$work/b.zst")"
    report "$label delta, in create" "$bytes_b" "$inc" "$zb" \
        $((pair - $(held_bytes "$work/s.traj"))) "$(file_size "$work/b.zst")"
    if [ -n "${BASELINE:-}" ]; then
        rm -f "$work/base.traj"
        "$BASELINE" create -q -T 1 "$work/base.traj" "$a" "$b" || die "$BASELINE failed"
        today=$(held_bytes "$work/base.traj")
    elif [ "$suffix" = "" ]; then
        today=$today_bf16
    else
        today=$today_f32
    fi
    awk -v l="$label" -v p="$pair" -v t="$today" 'BEGIN {
        printf "  %s pair archive: %d B, %.4fx the %d B of before\n", l, p, p / t, t }' >> "$work/sizes"
}

# report LABEL BYTES TRAJPACK_CPU ZSTD_CPU TRAJPACK_STORED ZSTD_STORED
report() {
    awk -v l="$1" -v b="$2" -v t="$3" -v z="$4" -v st="$5" -v sz="$6" 'BEGIN {
        printf "%-30s %6.1f %7.3f %7.0f %7.3f %7.0f %6.2fx %9.0f %9.0f\n", l, b / 1e6, t,
            b / t / 1e6, z, b / z / 1e6, z / t, st / 1e3, sz / 1e3 }'
}

echo "corpus $corpus, steps $step_a and $step_b, $(nproc) CPUs, best of $repeat"
printf '%-30s %6s %7s %7s %7s %7s %7s %9s %9s\n' "" "" "trajpack" "" "zstd -3" "" "speed" \
    "trajpack" "zstd"
printf '%-30s %6s %7s %7s %7s %7s %7s %9s %9s\n' file MB "CPU s" "MB/s" "CPU s" "MB/s" \
    "ratio" "kB" "kB"
: > "$work/sizes"
row "bf16 weights" ""
row "fp32 AdamW state" ".optim"
echo "sizes:"
cat "$work/sizes"

$big || exit 0

# ---- memory: a pair of checkpoints with a 4.3 GB tensor ----
big_elems=$(((1 << 31) + 12345))
echo "memory: generating two checkpoints of one bf16 tensor of $big_elems elements"
"$PYTHON" "$here/tests/tools/big_pair.py" "$work/big" "$big_elems" ||
    die "generating the big pair failed"
big_bytes=$(($(file_size "$work/big/step-1.safetensors") + $(file_size "$work/big/step-2.safetensors")))
for t in 1 2; do
    rm -f "$work/big.traj"
    s=$(cpu "$TRAJPACK" create -q -T $t "$work/big.traj" "$work/big")
    awk -v t="$t" -v s="$s" -v r="$(cat "$work/rss")" -v b="$big_bytes" -v a="$(held_bytes "$work/big.traj")" 'BEGIN {
        printf "  trajpack create -T %d: %.2f GB in %.2f GB, %.1f CPU s, peak RSS %.0f MiB\n",
            t, b / 1e9, a / 1e9, s, r / 1024 }'
done
rm -f "$work/big.traj"
[ -x "$TRAJFS" ] && command -v fusermount3 > /dev/null || exit 0
mount_daemon "$TRAJFS" "$work/mount.traj" "$mnt" -f -o rw,threads=2
cp -r "$work/big" "$mnt/" || die "cp into the mount failed"
peak_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$daemon/status")
unmount || die "trajfs exited with status $?"
awk -v r="$peak_kib" -v b="$big_bytes" -v a="$(held_bytes "$work/mount.traj")" 'BEGIN {
    printf "  cp into a mount (-o rw,threads=2): %.2f GB in %.2f GB, daemon peak RSS %.0f MiB\n",
        b / 1e9, a / 1e9, r / 1024 }'
