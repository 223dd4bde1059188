#!/bin/sh
# torch.save files in trajpack (tests/tools/make_torch_files.py). The
# layouts of the transformers Trainer, Lightning, DeepSpeed and plain
# state dicts (fp32, bf16, fp16) round-trip byte-identical through
# trajpack extract, packed by trajpack create and by trajpack add one
# file at a time, and each is stored in at most 1.01x the archive of the
# flat safetensors layout of the same tensors: each storage of a torch
# file is a tensor, delta-coded against the same tensor (by its path in
# the saved object) of the run's previous checkpoint, and the second
# checkpoint's optimizer.pt is stored as deltas. Odd but valid files
# round-trip; hostile ones are accepted, stored as opaque bytes and read
# back byte-identical, also when added as a checkpoint's optimizer.pt
# beside stored ones. Reading them through a mount and torch.load:
# mount_torchsave.sh.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/layoutlib.sh"

# Four checkpoints of a 1-layer, width-128 model with AdamW state (the
# trainer baseline stores in 6.1 MB). One checkpoint stored without
# references (and the next one referring two checkpoints back) costs
# 1.6% (lightning) to 5.2% (statedict) of the tensors' bytes, which the
# bound compares; what a torch file holds beside its storages (pickle,
# zip records) and the catalog are not counted.
generate_trajectory "$TEST_TMP/run" --layers 1 --width 128 --heads 2 --ctx 32 --batch 2 --steps 8 \
    --interval 2 --max-chars 20000 --dtype bf16,fp32 --optimizer
make_torch_layouts "$TEST_TMP" "$TEST_TMP/run"
make_torch_layouts "$TEST_TMP" "$TEST_TMP/run" --baseline
for kind in odd hostile; do
    "$PYTHON" "$MAKE_TORCH_FILES" "$kind" "$TEST_TMP/$kind" || fail "make_torch_files.py $kind failed"
done
mkdir "$TEST_TMP/base"
bound=1.01
# Findings that need the torch.save format, reported together at the end
# so that every other check runs first.
too_big=""
no_deltas=""

# extracts_same ARCHIVE TREE...: extract gives each TREE's files (by its
# base name) with their bytes, and verify passes.
extracts_same() {
    _archive=$1
    shift
    rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
    "$TRAJPACK" extract -q "$_archive" -C "$TEST_TMP/out" || fail "extract $_archive failed"
    for _tree in "$@"; do
        diff -r "$_tree" "$TEST_TMP/out/$(basename "$_tree")" > "$TEST_TMP/diff" ||
            { cat "$TEST_TMP/diff" >&2; fail "$_archive: extract differs from $_tree"; }
    done
    "$TRAJPACK" verify -q "$_archive" > /dev/null || fail "verify $_archive failed"
}

# opaque ARCHIVE PATH: PATH is stored with no tensor (trajpack list
# --blobs names none).
opaque() {
    _tensors=$("$TRAJPACK" list --blobs "$1" "$2" | awk -F'\t' 'NR > 1 && $9 != "-" { print $9 }')
    [ -z "$_tensors" ] || fail "$2 is hostile but was parsed: tensors $(echo "$_tensors" | tr "\n" " ")"
}

# delta_share ARCHIVE PATH: the delta share trajpack list -l shows for
# the file PATH ("-" when it holds no tensors).
delta_share() {
    "$TRAJPACK" list -l "$1" "$2" |
        awk -v p="$2" '$NF == p { s = "-"; for (i = 1; i < NF; i++) if ($i == "delta") s = $(i + 1); print s }'
}

for layout in $TORCH_LAYOUTS; do
    tree=$TEST_TMP/torch/$layout
    base=$(baseline_bytes "$TEST_TMP/torch-baselines/$layout" "$TEST_TMP/base")
    archive=$TEST_TMP/$layout.traj
    "$TRAJPACK" create -q "$archive" "$tree" || fail "create $layout failed"
    extracts_same "$archive" "$tree"
    size_within "$archive" "$base" "$layout by trajpack create"
    pack_files_one_at_a_time "$TEST_TMP/$layout.add.traj" "$tree"
    extracts_same "$TEST_TMP/$layout.add.traj" "$tree"
    size_within "$TEST_TMP/$layout.add.traj" "$base" "$layout by trajpack add, one file at a time"
done

second=$(cd "$TEST_TMP/torch" && find trainer -maxdepth 1 -name 'checkpoint-*' | LC_ALL=C sort -V | sed -n 2p)
second=$second/optimizer.pt
share=$(delta_share "$TEST_TMP/trainer.traj" "$second")
[ -n "$share" ] || fail "trajpack list -l does not list $second"
case $share in
-|0%) no_deltas="$second: delta $share in trajpack list -l" ;;
esac

# ---- odd and hostile files ----
archive=$TEST_TMP/odd.traj
"$TRAJPACK" create -q "$archive" "$TEST_TMP/odd" "$TEST_TMP/hostile" 2> "$TEST_TMP/err" ||
    fail "create of the odd and hostile files failed: $(cat "$TEST_TMP/err")"
extracts_same "$archive" "$TEST_TMP/odd" "$TEST_TMP/hostile"
for f in "$TEST_TMP/hostile"/*; do
    opaque "$archive" "hostile/$(basename "$f")"
done
# As the next checkpoints' optimizer.pt of a run whose optimizer.pt files
# are stored: references are there to be found, and must not be taken.
archive=$TEST_TMP/trainer.traj
step=1000
for f in "$TEST_TMP/hostile"/*; do
    dest=trainer/checkpoint-$step/optimizer.pt
    step=$((step + 10))
    "$TRAJPACK" add -q "$archive" "$f" --as "$dest" 2> "$TEST_TMP/err" ||
        fail "adding $(basename "$f") as $dest failed: $(cat "$TEST_TMP/err")"
    "$TRAJPACK" extract -q "$archive" "$dest" -O > "$TEST_TMP/one" || fail "extract $dest failed"
    cmp "$f" "$TEST_TMP/one" || fail "$(basename "$f") added as $dest reads back other bytes"
    opaque "$archive" "$dest"
done
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after the hostile optimizer.pt files failed"

[ -z "$too_big$no_deltas" ] ||
    fail "torch.save files not stored as tensors:${too_big:+
tensors stored in more than $bound x the bytes of the flat safetensors layout:$too_big}${no_deltas:+
  $no_deltas}"
exit 0
