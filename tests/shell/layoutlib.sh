# Sourced by the layout tests (tests/shell/layouts.sh,
# mount_rw_patterns.sh, torchsave.sh, mount_torchsave.sh) after lib.sh,
# and by bench/bench_layouts.sh: checkpoint layouts of one trajectory
# (tests/tools/make_layouts.py; torch.save ones:
# tests/tools/make_torch_files.py), the savers' patterns
# (tests/tools/save_patterns.py), and what they pack to.
# Needs top_srcdir, TRAJPACK, PYTHON and a function fail; helpers name
# their variables _like_this (see lib.sh).

MAKE_LAYOUTS=$top_srcdir/tests/tools/make_layouts.py
SAVE_PATTERNS=$top_srcdir/tests/tools/save_patterns.py
MAKE_TORCH_FILES=$top_srcdir/tests/tools/make_torch_files.py
TORCH_SAME=$top_srcdir/tests/tools/torch_same.py

# Layouts whose archives are compared with their flat baseline (addlater
# is packed its own way: pack_added_later) and the savers' patterns.
LAYOUTS="flat single sharded alternating prefix sweep"
PATTERNS="cp trainer tmpfile rsync direct"
# Layouts of torch.save files, each compared with its flat safetensors
# baseline.
TORCH_LAYOUTS="trainer lightning deepspeed statedict"

# make_layouts DIR TRAJ TRAJ2: DIR/layouts/L and DIR/baselines/L for every
# layout (make_layouts.py), from the trajectory TRAJ (TRAJ2: the other
# run of the sweep).
make_layouts() {
    for _l in $LAYOUTS addlater unmatched; do
        _runs=$2
        [ "$_l" = sweep ] && _runs="$2 $3"
        # shellcheck disable=SC2086 # _runs: one or two directories
        "$PYTHON" "$MAKE_LAYOUTS" "$_l" "$1/layouts/$_l" $_runs ||
            fail "make_layouts.py $_l failed"
        [ "$_l" = unmatched ] && continue
        # shellcheck disable=SC2086
        "$PYTHON" "$MAKE_LAYOUTS" --baseline "$_l" "$1/baselines/$_l" $_runs ||
            fail "make_layouts.py --baseline $_l failed"
    done
}

# make_torch_layouts DIR TRAJ [--baseline]: DIR/torch/L for every torch
# layout L (make_torch_files.py) from the trajectory TRAJ, or with
# --baseline DIR/torch-baselines/L, their flat safetensors layouts.
make_torch_layouts() {
    _into=$1/torch
    [ "${3:-}" = --baseline ] && _into=$1/torch-baselines
    for _l in $TORCH_LAYOUTS; do
        "$PYTHON" "$MAKE_TORCH_FILES" ${3:+"$3"} "$_l" "$_into/$_l" "$2" ||
            fail "make_torch_files.py ${3:+$3 }$_l failed"
    done
}

# tensor_bytes ARCHIVE: the bytes of its tensors' stored chunks (trajpack
# stats): what references save, without the catalog, whose cost grows
# with the number of files and commits rather than with their tensors.
tensor_bytes() {
    "$TRAJPACK" stats --json "$1" |
        "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["tensors"]["stored_bytes"])' ||
        fail "trajpack stats $1 failed"
}

# size_within ARCHIVE BASELINE_BYTES WHAT: notes WHAT in too_big when the
# tensors of ARCHIVE take more than $bound times the baseline's bytes
# (the callers report them all at the end).
size_within() {
    _bytes=$(tensor_bytes "$1")
    awk -v a="$_bytes" -v b="$2" -v m="$bound" 'BEGIN { exit !(a <= m * b) }' ||
        too_big="$too_big
  $3: $_bytes bytes of tensors, $(ratio "$_bytes" "$2")x the flat layout's $2"
}

# baseline_bytes BASELINE WORK: packs each directory of a baseline (from
# make_layouts.py --baseline) into its own archive WORK/NAME.traj and
# prints the sum of their tensor bytes.
baseline_bytes() {
    _sum=0
    for _d in "$1"/*/; do
        _a=$2/$(basename "$_d").traj
        rm -f "$_a"
        "$TRAJPACK" create -q "$_a" "$_d" || fail "trajpack create $_a $_d failed"
        _sum=$((_sum + $(tensor_bytes "$_a")))
    done
    echo "$_sum"
}

# pack_one_at_a_time ARCHIVE TREE: creates ARCHIVE with the first
# checkpoint of TREE and adds the others with one trajpack add each, in
# the order a run saves them, at the paths trajpack create TREE gives.
pack_one_at_a_time() {
    _order=$("$PYTHON" "$SAVE_PATTERNS" list "$2") || fail "save_patterns.py list $2 failed"
    _verb=create
    while IFS= read -r _p; do
        [ -n "$_p" ] || continue
        "$TRAJPACK" "$_verb" -q "$1" "$(dirname "$2")/$_p" --as "$_p" ||
            fail "trajpack $_verb $1 $_p failed"
        _verb=add
    done <<EOF
$_order
EOF
    [ "$_verb" = add ] || fail "$2 has no checkpoints"
}

# pack_files_one_at_a_time ARCHIVE TREE: creates ARCHIVE with the first
# file of TREE and adds the others with one trajpack add each, in the
# natural order of their paths (the order the runs of the torch layouts
# write them), at the paths trajpack create TREE gives.
pack_files_one_at_a_time() {
    _verb=create
    while IFS= read -r _p; do
        [ -n "$_p" ] || continue
        "$TRAJPACK" "$_verb" -q "$1" "$(dirname "$2")/$_p" --as "$_p" ||
            fail "trajpack $_verb $1 $_p failed"
        _verb=add
    done <<EOF
$(cd "$(dirname "$2")" && find "$(basename "$2")" -type f | LC_ALL=C sort -V)
EOF
    [ "$_verb" = add ] || fail "$2 has no files"
}

# pack_added_later ARCHIVE TREE [--as]: TREE is the addlater layout
# (NAME/out/checkpoint-N): trajpack create of the tree as it was before
# its last checkpoint, then trajpack add of that checkpoint, under its
# base name (where `trajpack add ARCHIVE out/checkpoint-N` puts it: at
# the top of the archive) or, with --as, at NAME/out/checkpoint-N.
# Prints the archive path of the last checkpoint.
pack_added_later() {
    _last=$("$PYTHON" "$SAVE_PATTERNS" list "$2" | tail -n 1)
    [ -n "$_last" ] || fail "$2 has no checkpoints"
    _early=$1.early/$(basename "$2")
    mkdir -p "$1.early"
    cp -al "$2" "$_early" 2> /dev/null || cp -a "$2" "$_early"
    rm -r "${_early:?}/${_last#*/}"
    "$TRAJPACK" create -q "$1" "$_early" || fail "trajpack create $1 failed"
    rm -r "$1.early"
    if [ "${3:-}" = --as ]; then
        "$TRAJPACK" add -q "$1" "$(dirname "$2")/$_last" --as "$_last" || fail "trajpack add --as $_last failed"
        echo "$_last"
    else
        "$TRAJPACK" add -q "$1" "$(dirname "$2")/$_last" || fail "trajpack add $_last failed"
        basename "$_last"
    fi
}

# Bytes of stored data in ARCHIVE: its size less the catalog and framing
# (trajpack stats: overhead_bytes), which grow with the number of commits.
payload_bytes() {
    "$TRAJPACK" stats --json "$1" |
        "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(d["archive_bytes"] - d["overhead_bytes"])' ||
        fail "trajpack stats --json $1 failed"
}

# ratio A B: A / B with four decimals.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f\n", a / b }'
}
