#!/bin/sh
# The size of archives of one trajectory saved in the layouts trainers
# write, against the flat layout of the same tensors.
#
#   bench/bench_layouts.sh [DIR]
#
# Generates two small training runs (tests/tools/make_trajectory.py, other
# seeds) and their layouts (tests/tools/make_layouts.py: flat, single, sharded,
# alternating, prefix, sweep, addlater; tests/tools/make_torch_files.py,
# torch.save files of the first run: trainer, lightning, deepspeed,
# statedict) into DIR, once: a DIR that holds them already is reused
# (default: a scratch directory, removed at exit).
# BENCH_GEN_ARGS replaces the generator's options (default below). Then
# packs each layout
#
#   create          trajpack create of the layout's directory
#   add             trajpack add of one checkpoint after the other
#   add             (torch layouts) trajpack add of one file after the
#                   other, in the natural order of their paths
#   rw:PATTERN      saved into a new archive's -o rw mount by
#                   tests/tools/save_patterns.py PATTERN (cp, trainer,
#                   tmpfile, rsync, direct; torch layouts: trainer, which
#                   saves a file outside a checkpoint-N directory under
#                   tmp-NAME and renames it)
#   create+add      (addlater) trajpack create of out/ before its last
#                   checkpoint, then `trajpack add ARCHIVE out/checkpoint-N`,
#                   which stores it under its base name, at the top
#   create+add --as (addlater) the same, the last checkpoint added with
#                   --as NAME/out/checkpoint-N beside the others
#
# and prints one table: layout, method, archive bytes (those the disk
# holds, as every size below), their ratio to the
# archive(s) of the flat layout of the same tensors (make_layouts.py or
# make_torch_files.py --baseline), and the same ratio of the stored data alone (archive less
# catalog and framing, which grow with each commit: a rename in a mount is
# one). Then a cold read: the last checkpoint's optimizer.pt (trainer,
# packed by trajpack create) read through a fresh read-only mount after
# the page cache is dropped (echo 3 > /proc/sys/vm/drop_caches; as root),
# against the same for the safetensors file of its tensors in the flat
# layout's archive, in MB/s of file bytes, and their ratio. No
# thresholds. Needs FUSE, rsync and the built trajfs and trajpack
# (BUILDDIR, default the checkout); the archives go to TMPDIR.
set -eu

top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3
gen_args=${BENCH_GEN_ARGS:---layers 2 --width 96 --heads 4 --ctx 64 --batch 4 --steps 30 --interval 5 --max-chars 200000}

. "$top_srcdir/bench/benchlib.sh"
bench_init bench_layouts
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
command -v rsync > /dev/null || die "rsync not found"
. "$top_srcdir/tests/shell/layoutlib.sh"

data=${1:-$work/data}
mkdir -p "$data"

if [ ! -f "$data/layouts.done" ]; then
    rm -rf "$data/run1" "$data/run2" "$data/layouts" "$data/baselines"
    echo "generating two runs ($gen_args) and their layouts in $data ..."
    # shellcheck disable=SC2086 # gen_args: the generator's options
    "$PYTHON" "$GENERATOR" --out "$data/run1" $gen_args --dtype bf16,fp32 --optimizer > "$work/gen.log" 2>&1 &&
        "$PYTHON" "$GENERATOR" --out "$data/run2" $gen_args --seed 4321 --dtype bf16,fp32 --optimizer \
            >> "$work/gen.log" 2>&1 ||
        { cat "$work/gen.log" >&2; die "the generator failed"; }
    make_layouts "$data" "$data/run1" "$data/run2"
    touch "$data/layouts.done"
fi
if [ ! -f "$data/torch.done" ]; then
    rm -rf "$data/torch" "$data/torch-baselines"
    echo "writing the torch.save layouts of run1 in $data ..."
    make_torch_layouts "$data" "$data/run1"
    make_torch_layouts "$data" "$data/run1" --baseline
    touch "$data/torch.done"
fi

# mount_archive ARCHIVE [trajfs options...]: mounts ARCHIVE at mnt.
mount_archive() {
    mount_daemon "$TRAJFS" "$@" "$mnt" -f
}

unmount_archive() {
    unmount || die "trajfs exited with status $?"
}

# save_in_mount PATTERN TREE ARCHIVE: TREE saved with PATTERN into a
# -o rw mount of the new ARCHIVE, then unmounted.
save_in_mount() {
    mount_archive "$3" -o rw
    "$PYTHON" "$SAVE_PATTERNS" "$1" "$2" "$mnt" || die "save_patterns.py $1 $2 failed"
    unmount_archive
}

# cold_read ARCHIVE PATH: sets rate to the MB/s of reading PATH through
# a fresh read-only mount of ARCHIVE, the page cache dropped first.
cold_read() {
    sync
    [ -n "$caches" ] || echo 3 > /proc/sys/vm/drop_caches
    mount_archive "$1"
    _t0=$(date +%s%N)
    cat "$mnt/$2" > /dev/null || die "reading $2 through the mount failed"
    _t1=$(date +%s%N)
    _bytes=$(stat -c %s "$mnt/$2")
    unmount_archive
    rate=$(awk -v b="$_bytes" -v ns=$((_t1 - _t0)) 'BEGIN { printf "%.1f", b / 1e6 / (ns / 1e9) }')
}

# held_data ARCHIVE: the bytes of stored data the disk holds for ARCHIVE:
# what it holds less the catalog and framing (trajpack stats --json).
held_data() {
    "$TRAJPACK" stats --json "$1" |
        "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(d["allocated_bytes"] - d["overhead_bytes"])' ||
        die "trajpack stats --json $1 failed"
}

# row LAYOUT METHOD ARCHIVE: one line of the table.
row() {
    _b=$(held_bytes "$3")
    printf '%-12s %-16s %12d %8s %8s\n' "$1" "$2" "$_b" "$(ratio "$_b" "$base")" \
        "$(ratio "$(held_data "$3")" "$base_payload")"
}

# baseline DIR: the flat baseline of a layout (make_layouts.py or
# make_torch_files.py --baseline): sets base and base_payload, the bytes
# the disk holds for its archives and their stored data.
baseline() {
    rm -rf "$work/base"
    mkdir "$work/base"
    baseline_bytes "$1" "$work/base" > /dev/null
    base=$(held_bytes "$work/base"/*.traj)
    base_payload=0
    for _a in "$work/base"/*.traj; do
        base_payload=$((base_payload + $(held_data "$_a")))
    done
}

t0=$(date +%s)
echo "$(du -sb "$data/baselines/flat" | cut -f1) bytes of files in the flat layout, $(nproc) CPUs"
printf '%-12s %-16s %12s %8s %8s\n' layout method bytes ratio data
for layout in $LAYOUTS; do
    tree=$data/layouts/$layout
    baseline "$data/baselines/$layout"
    a=$work/$layout.traj
    "$TRAJPACK" create -q "$a" "$tree" || die "trajpack create $layout failed"
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
baseline "$data/baselines/addlater"
a=$work/addlater.traj
pack_added_later "$a" "$data/layouts/addlater" > /dev/null
row addlater create+add "$a"
rm -f "$a"
pack_added_later "$a" "$data/layouts/addlater" --as > /dev/null
row addlater "create+add --as" "$a"
for layout in $TORCH_LAYOUTS; do
    tree=$data/torch/$layout
    baseline "$data/torch-baselines/$layout"
    a=$work/$layout.traj
    "$TRAJPACK" create -q "$a" "$tree" || die "trajpack create $layout failed"
    row "$layout" create "$a"
    rm -f "$a"
    pack_files_one_at_a_time "$a" "$tree"
    row "$layout" add "$a"
    rm -f "$a"
    save_in_mount trainer "$tree" "$a"
    row "$layout" rw:trainer "$a"
    rm -f "$a"
done

last=$(cd "$data/torch" && find trainer -maxdepth 1 -name 'checkpoint-*' | LC_ALL=C sort -V | tail -n 1)
caches=""
(echo 3 > /proc/sys/vm/drop_caches) 2> /dev/null || caches="the page cache was not dropped: not root?"
"$TRAJPACK" create -q "$work/trainer.traj" "$data/torch/trainer" || die "trajpack create trainer failed"
"$TRAJPACK" create -q "$work/flat.traj" "$data/torch-baselines/trainer/flat" || die "trajpack create of the baseline failed"
flat=flat/step-${last##*-}.optimizer.safetensors
cold_read "$work/trainer.traj" "$last/optimizer.pt"
torch_rate=$rate
cold_read "$work/flat.traj" "$flat"
flat_rate=$rate
echo "cold read through a fresh mount: $last/optimizer.pt $torch_rate MB/s," \
    "$flat $flat_rate MB/s, ratio $(awk -v a="$torch_rate" -v b="$flat_rate" 'BEGIN { printf "%.2f", a / b }')${caches:+ ($caches)}"
echo "($(($(date +%s) - t0)) s)"
