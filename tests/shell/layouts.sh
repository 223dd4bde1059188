#!/bin/sh
# The layouts trainers write (tests/tools/make_layouts.py: flat, single,
# sharded, alternating dtypes, a name prefix from the middle on, a sweep of
# two runs, a checkpoint added later) round-trip byte-identical through
# trajpack extract and a read-only mount, packed by trajpack create and by
# trajpack add one checkpoint at a time; and each stores its tensors in
# at most 1.01x the bytes of the flat layout's: the reference
# of a tensor is found wherever its previous checkpoint put it. The runs
# of a sweep take no references from each other once their own history
# has the tensor. A checkpoint whose tensors match nothing stored is
# accepted and stored without references.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/layoutlib.sh"

# Four checkpoints of a 1-layer, width-64 model with AdamW state (about
# 1.7 MB stored a layout). The weights of one checkpoint stored without
# their deltas cost about 1.7% of its tensor bytes (those of all but the
# first, 5%). Compared are the tensors' bytes, not the archives': a
# layout puts its tensors in more files, each with a header, a catalog
# entry and a commit (about 2 kB a file), which on models this small
# would blur what the bound is for.
run_args="--layers 1 --width 64 --heads 2 --ctx 32 --batch 2 --steps 8 --interval 2
          --max-chars 20000 --dtype bf16,fp32 --optimizer"
# shellcheck disable=SC2086 # run_args: the generator's options
generate_trajectory "$TEST_TMP/run1" $run_args
# shellcheck disable=SC2086
generate_trajectory "$TEST_TMP/run2" $run_args --seed 4321
make_layouts "$TEST_TMP" "$TEST_TMP/run1" "$TEST_TMP/run2"
mkdir "$TEST_TMP/base"
bound=1.01
too_big=""

# same_files TREE DIR: DIR holds TREE's files with TREE's bytes.
same_files() {
    diff -r "$1" "$2" > /dev/null || { diff -r "$1" "$2" >&2; fail "$2 differs from $1"; }
}

# reads_back ARCHIVE TREE ATTRS: extract and a read-only mount give
# TREE's files (with ATTRS=attrs also their modes and mtimes).
reads_back() {
    rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
    "$TRAJPACK" extract -q "$1" -C "$TEST_TMP/out" || fail "extract $1 failed"
    "$TRAJPACK" verify -q "$1" > /dev/null || fail "verify $1 failed"
    start_mount "$1" "$TEST_TMP/mnt"
    for _got in "$TEST_TMP/out" "$TEST_TMP/mnt"; do
        if [ "$3" = attrs ]; then
            assert_same_tree "$2" "$_got/$(basename "$2")"
        else
            same_files "$2" "$_got/$(basename "$2")"
        fi
    done
    stop_mount "$TEST_TMP/mnt"
}

for layout in $LAYOUTS; do
    tree=$TEST_TMP/layouts/$layout
    base=$(baseline_bytes "$TEST_TMP/baselines/$layout" "$TEST_TMP/base")
    archive=$TEST_TMP/$layout.traj
    "$TRAJPACK" create -q "$archive" "$tree" || fail "create $layout failed"
    reads_back "$archive" "$tree" attrs
    size_within "$archive" "$base" "$layout by trajpack create"
    # Directories made for --as have their own mode and time.
    pack_one_at_a_time "$TEST_TMP/$layout.add.traj" "$tree"
    reads_back "$TEST_TMP/$layout.add.traj" "$tree" content
    size_within "$TEST_TMP/$layout.add.traj" "$base" "$layout by trajpack add, one checkpoint at a time"
done

# ---- a sweep: no references across runs after a run's first checkpoint ----
first=$("$PYTHON" "$SAVE_PATTERNS" list "$TEST_TMP/layouts/sweep" | grep '^sweep/run2/' | head -n 1 | cut -d. -f1)
[ -n "$first" ] || fail "the sweep has no run2"
for a in sweep sweep.add; do
    "$TRAJPACK" list --blobs "$TEST_TMP/$a.traj" > "$TEST_TMP/blobs" || fail "list --blobs failed"
    crossed=$(awk -F'\t' -v first="$first." '
        NR == FNR { if (index($8, "sweep/run2/") == 1) in_run2[$1] = 1; next }
        FNR > 1 && index($8, "sweep/run2/") == 1 && index($8, first) != 1 && $6 != "-" && !($6 in in_run2) {
            print $8 " " $9 " is a delta against blob " $6 " of run1"
        }' "$TEST_TMP/blobs" "$TEST_TMP/blobs")
    [ -z "$crossed" ] || fail "$a: run2 of the sweep takes references from run1: $crossed"
done

# ---- a checkpoint added to the archive later ----
tree=$TEST_TMP/layouts/addlater
base=$(baseline_bytes "$TEST_TMP/baselines/addlater" "$TEST_TMP/base")
last=$(pack_added_later "$TEST_TMP/later.traj" "$tree" --as) || exit 1
reads_back "$TEST_TMP/later.traj" "$tree" content
size_within "$TEST_TMP/later.traj" "$base" "addlater, the last checkpoint added by trajpack add --as $last"
# Under its base name (as `trajpack add ARCHIVE out/checkpoint-N` stores
# it) it lies at the top of the archive, beside the others' directory.
top=$(pack_added_later "$TEST_TMP/later-top.traj" "$tree") || exit 1
rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$TEST_TMP/later-top.traj" -C "$TEST_TMP/out" || fail "extract failed"
[ "$(cd "$TEST_TMP/out" && echo *)" = "addlater $top" ] ||
    fail "trajpack add of $last stored: $(cd "$TEST_TMP/out" && echo *), not addlater and $top"
mv "$TEST_TMP/out/$top" "$TEST_TMP/out/$(dirname "$last")/"
same_files "$tree" "$TEST_TMP/out/addlater"

# ---- checkpoints whose tensors match nothing stored ----
# The last weights with every tensor cut to half its elements (the names
# of stored tensors, other element counts), and tensors of names no
# checkpoint has: accepted as next checkpoints of stored series, stored
# without references, read back the same.
unmatched=$(ls "$TEST_TMP/layouts/unmatched"/*.safetensors)
mkdir "$TEST_TMP/foreign"
"$PYTHON" "$top_srcdir/tests/tools/write_checkpoints.py" "$TEST_TMP/foreign" 1 1 20000 ||
    fail "write_checkpoints.py failed"
archive=$TEST_TMP/sharded.traj
for pair in "$unmatched sharded/checkpoint-10/model-00001-of-00003.safetensors" \
            "$unmatched sharded/checkpoint-10/optimizer.safetensors" \
            "$TEST_TMP/foreign/step-1.safetensors sharded/checkpoint-12/model-00002-of-00003.safetensors"; do
    src=${pair%% *} dest=${pair#* }
    "$TRAJPACK" add -q "$archive" "$src" --as "$dest" 2> "$TEST_TMP/err" ||
        fail "adding a checkpoint that matches nothing as $dest failed: $(cat "$TEST_TMP/err")"
    "$TRAJPACK" extract -q "$archive" "$dest" -O > "$TEST_TMP/one" || fail "extract $dest failed"
    cmp "$src" "$TEST_TMP/one" || fail "$dest reads back other bytes"
    refs=$("$TRAJPACK" list --blobs "$archive" "$dest" | awk -F'\t' 'NR > 1 && $6 != "-"')
    [ -z "$refs" ] || fail "$dest matches nothing stored but has deltas: $refs"
done
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after the unmatched checkpoints failed"

[ -z "$too_big" ] || fail "tensors stored in more than $bound x the bytes of the flat layout:$too_big"
exit 0
