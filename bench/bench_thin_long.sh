#!/bin/sh
# Thinning a long run: what `trajpack rm` leaves on disk when a run of
# many checkpoints (several keyframes in each chunk's series, where the
# benchmark corpus's 16 checkpoints have one) is thinned.
#
#   bench/bench_thin_long.sh [CHECKPOINTS [CHUNK_SHIFT...]]
#
# CHECKPOINTS (default 200) small checkpoints of 100 bf16 tensors of
# 4096 elements (bench/make_small_run.py, 819 kB each), stored with
# `trajpack create` (default settings but --chunk-shift, default 20 and
# 10). Scenarios, the N-th checkpoint counted from the oldest:
#   every-4th   keep every 4th
#   every-8th   keep every 8th
#   keep-last-4 keep the newest 4
# For each: one `trajpack rm` of the others, then `trajpack repack`.
# Printed: the bytes the disk holds (st_blocks) after rm and after
# repack, a fresh `trajpack create` of exactly the kept files, the
# ratios, and how many of the kept checkpoints' bf16 weights are in
# keyframes after rm and in the fresh archive (`trajpack stats`).
# Figures only, no thresholds; about a minute on 2 cores; needs numpy.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/benchlib.sh"
bench_init bench_thin_long
[ -x "$TRAJPACK" ] || die "build trajpack first (or set BUILDDIR)"
count=${1:-200}
[ $# -gt 0 ] && shift
shifts=${*:-20 10}

/usr/bin/python3 "$here/bench/make_small_run.py" "$work/run" "$count" > /dev/null ||
    die "make_small_run.py failed (numpy?)"

held() { echo $(($(stat -c %b "$1") * $(stat -c %B "$1"))); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? a / b : 0 }'; }
keyframe_weights() { "$TRAJPACK" stats "$1" | awk '$NF == "keyframe" { print $1; exit }'; }

# keeps SCENARIO N: whether the scenario keeps the N-th checkpoint (from 1).
keeps() {
    case $1 in
    every-4th) [ $(($2 % 4)) -eq 0 ] ;;
    every-8th) [ $(($2 % 8)) -eq 0 ] ;;
    keep-last-4) [ "$2" -gt $((count - 4)) ] ;;
    *) die "no scenario $1" ;;
    esac
}

printf '%-6s %-12s %5s %11s %11s %11s %8s %8s %15s\n' shift scenario kept "after rm" "repacked" \
    fresh "rm/fresh" "rp/fresh" "keyframes rm/fr"
for cs in $shifts; do
    "$TRAJPACK" create -q --chunk-shift "$cs" "$work/full.tj" "$work/run"
    for s in every-4th every-8th keep-last-4; do
        rm -rf "$work/kept" "$work/a.tj" "$work/fresh.tj"
        mkdir "$work/kept"
        n=0 kept=0
        set --
        for f in "$work"/run/step-*.safetensors; do
            n=$((n + 1))
            name=$(basename "$f")
            if keeps "$s" "$n"; then
                ln "$f" "$work/kept/$name"
                kept=$((kept + 1))
            else
                set -- "$@" "run/$name"
            fi
        done
        cp --sparse=always "$work/full.tj" "$work/a.tj"
        "$TRAJPACK" rm -q "$work/a.tj" "$@"
        after_rm=$(held "$work/a.tj")
        rm_keyframes=$(keyframe_weights "$work/a.tj")
        "$TRAJPACK" repack -q "$work/a.tj" > /dev/null
        repacked=$(held "$work/a.tj")
        "$TRAJPACK" create -q --chunk-shift "$cs" --as run "$work/fresh.tj" "$work/kept"
        fresh=$(held "$work/fresh.tj")
        printf '%-6s %-12s %5s %11s %11s %11s %8s %8s %15s\n' "$cs" "$s" "$kept" "$after_rm" \
            "$repacked" "$fresh" "$(ratio "$after_rm" "$fresh")" "$(ratio "$repacked" "$fresh")" \
            "${rm_keyframes:-0}/$(keyframe_weights "$work/fresh.tj")"
    done
    rm -f "$work/full.tj"
done
