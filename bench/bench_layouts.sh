#!/bin/sh
# The size of archives of one trajectory saved in the layouts trainers
# write, against the flat layout of the same tensors.
#
#   bench/bench_layouts.sh [DIR]
#
# Generates two small training runs (make_trajectory.py, other seeds) and
# their layouts (tests/tools/make_layouts.py: flat, single, sharded,
# alternating, prefix, sweep, addlater) into DIR, once: a DIR that holds
# them already is reused (default: a scratch directory, removed at exit).
# BENCH_GEN_ARGS replaces the generator's options (default below). Then
# packs each layout
#
#   create          trajpack create of the layout's directory
#   add             trajpack add of one checkpoint after the other
#   rw:PATTERN      saved into a new archive's -o rw mount by
#                   tests/tools/save_patterns.py PATTERN (cp, trainer,
#                   tmpfile, rsync, direct)
#   create+add      (addlater) trajpack create of out/ before its last
#                   checkpoint, then `trajpack add ARCHIVE out/checkpoint-N`,
#                   which stores it under its base name, at the top
#   create+add --as (addlater) the same, the last checkpoint added with
#                   --as NAME/out/checkpoint-N beside the others
#
# and prints one table: layout, method, archive bytes, their ratio to the
# archive(s) of the flat layout of the same tensors (make_layouts.py
# --baseline), and the same ratio of the stored data alone (archive less
# catalog and framing, which grow with each commit: a rename in a mount is
# one). No thresholds. Needs FUSE, rsync and the built trajfs and trajpack
# (BUILDDIR, default the checkout); the archives go to TMPDIR.
set -eu

top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${BUILDDIR:-$top_srcdir}
TRAJFS=$builddir/trajfs
TRAJPACK=$builddir/trajpack
PYTHON=/usr/bin/python3
generator=${TRAJFS_CORPUS_SCRIPT:-$top_srcdir/../shared/corpus/make_trajectory.py}
gen_args=${BENCH_GEN_ARGS:---layers 2 --width 96 --heads 4 --ctx 64 --batch 4 --steps 30 --interval 5 --max-chars 200000}

fail() {
    echo "bench_layouts: $*" >&2
    exit 1
}
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || fail "build trajfs and trajpack first (or set BUILDDIR)"
[ -f "$generator" ] || fail "no corpus generator at $generator (set TRAJFS_CORPUS_SCRIPT)"
command -v rsync > /dev/null || fail "rsync not found"
. "$top_srcdir/tests/shell/layoutlib.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/trajfs-bench-layouts.XXXXXX")
data=${1:-$work/data}
mnt=$work/mnt
mkdir -p "$mnt" "$data"
daemon=""
mounted() {
    awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}
cleanup() {
    if mounted; then
        fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
    fi
    [ -z "$daemon" ] || { kill "$daemon" 2> /dev/null; wait "$daemon" 2> /dev/null; } || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ ! -f "$data/layouts.done" ]; then
    rm -rf "$data/run1" "$data/run2" "$data/layouts" "$data/baselines"
    echo "generating two runs ($gen_args) and their layouts in $data ..."
    # shellcheck disable=SC2086 # gen_args: the generator's options
    "$PYTHON" "$generator" --out "$data/run1" $gen_args --dtype bf16,fp32 --optimizer > "$work/gen.log" 2>&1 &&
        "$PYTHON" "$generator" --out "$data/run2" $gen_args --seed 4321 --dtype bf16,fp32 --optimizer \
            >> "$work/gen.log" 2>&1 ||
        { cat "$work/gen.log" >&2; fail "the generator failed"; }
    make_layouts "$data" "$data/run1" "$data/run2"
    touch "$data/layouts.done"
fi

# save_in_mount PATTERN TREE ARCHIVE: TREE saved with PATTERN into a
# -o rw mount of the new ARCHIVE, then unmounted.
save_in_mount() {
    "$TRAJFS" "$3" "$mnt" -f -o rw 2> "$work/daemon.log" &
    daemon=$!
    for _ in $(seq 100); do
        mounted && break
        kill -0 "$daemon" 2> /dev/null || { cat "$work/daemon.log" >&2; fail "trajfs did not mount"; }
        sleep 0.05
    done
    mounted || fail "no mount at $mnt after 5 s"
    "$PYTHON" "$SAVE_PATTERNS" "$1" "$2" "$mnt" || fail "save_patterns.py $1 $2 failed"
    fusermount3 -u "$mnt"
    wait "$daemon" || fail "trajfs exited with status $?"
    daemon=""
}

# row LAYOUT METHOD ARCHIVE: one line of the table.
row() {
    _b=$(stat -c %s "$3")
    printf '%-12s %-16s %12d %8s %8s\n' "$1" "$2" "$_b" "$(ratio "$_b" "$base")" \
        "$(ratio "$(payload_bytes "$3")" "$base_payload")"
}

# The flat baseline of a layout: sets base and base_payload.
baseline() {
    rm -rf "$work/base"
    mkdir "$work/base"
    base=$(baseline_bytes "$data/baselines/$1" "$work/base")
    base_payload=0
    for _a in "$work/base"/*.traj; do
        base_payload=$((base_payload + $(payload_bytes "$_a")))
    done
}

t0=$(date +%s)
echo "$(du -sb "$data/baselines/flat" | cut -f1) bytes of files in the flat layout, $(nproc) CPUs"
printf '%-12s %-16s %12s %8s %8s\n' layout method bytes ratio data
for layout in $LAYOUTS; do
    tree=$data/layouts/$layout
    baseline "$layout"
    a=$work/$layout.traj
    "$TRAJPACK" create -q "$a" "$tree" || fail "trajpack create $layout failed"
    row "$layout" create "$a"
    rm -f "$a"
    pack_one_at_a_time "$a" "$tree"
    row "$layout" add "$a"
    rm -f "$a"
    for pattern in $PATTERNS; do
        save_in_mount "$pattern" "$tree" "$a"
        row "$layout" "rw:$pattern" "$a"
        rm -f "$a"
    done
done
baseline addlater
a=$work/addlater.traj
pack_added_later "$a" "$data/layouts/addlater" > /dev/null
row addlater create+add "$a"
rm -f "$a"
pack_added_later "$a" "$data/layouts/addlater" --as > /dev/null
row addlater "create+add --as" "$a"
echo "($(($(date +%s) - t0)) s)"
