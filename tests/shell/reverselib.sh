# Sourced by the tests of reverse references after lib.sh: what an
# archive says of its layout (trajpack list, stats --json) and the
# checks of a series of checkpoints added one after another. Helpers
# name their variables _like_this (see lib.sh).

# The checkpoints the tests add, oldest first: steps 2 to 12 of a tiny
# bfloat16 run (generate_series DIR [make_trajectory.py options...]
# writes them, and config.json, into DIR).
STEPS="000002 000004 000006 000008 000010 000012"
generate_series() {
    _gs_dir=$1
    shift
    generate_trajectory "$_gs_dir" --layers 1 --width 32 --heads 2 --ctx 16 --batch 2 \
        --steps 12 --interval 2 --max-chars 20000 --dtype bf16 "$@"
}

# The share of the tensor bytes of archive file PATH stored as deltas,
# in percent (trajpack list -l: "delta 96%").
delta_share() { # ARCHIVE PATH
    "$TRAJPACK" list -l "$1" "$2" | awk -v p="$2" '$NF == p {
        for (i = 1; i < NF; i++) if ($i == "delta") { sub(/%$/, "", $(i + 1)); print $(i + 1) } }'
}

# A number of trajpack stats --json.
stats_number() { # ARCHIVE KEY
    "$TRAJPACK" stats --json "$1" | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p"
}

# How many chunks of tensors of archive file PATH decode through a
# reference (trajpack list --blobs).
chunks_with_reference() { # ARCHIVE PATH
    "$TRAJPACK" list --blobs "$1" "$2" |
        awk -F'\t' -v p="$2" '$8 == p && $9 != "-" && $6 != "-" { n++ } END { print n + 0 }'
}

# read_back ARCHIVE DIR STEP WHEN: run/step-STEP.safetensors of ARCHIVE
# extracts as DIR/step-STEP.safetensors (WHEN: the failure's context).
read_back() {
    "$TRAJPACK" extract -q -O "$1" "run/step-$3.safetensors" > "$TEST_TMP/extracted" ||
        fail "extract run/step-$3.safetensors failed"
    cmp "$TEST_TMP/extracted" "$2/step-$3.safetensors" ||
        fail "run/step-$3.safetensors differs $4"
}

# check_series ARCHIVE DIR MAXCHAIN CHAIN STEP...: the checkpoints
# DIR/step-STEP.safetensors were added as run/step-STEP.safetensors with
# --max-chain MAXCHAIN, STEP... oldest first. Each reads back as its
# source and verify passes; the newest is keyframes; each other one is
# mostly deltas but the (MAXCHAIN + 1)'th and every (2 MAXCHAIN + 1)'th
# after it, which stay mostly keyframes (MAXCHAIN reverse deltas, then
# windows of MAXCHAIN forward deltas and MAXCHAIN reverse ones); the
# longest chain is CHAIN deltas ("grown": as long as the bound lets a
# chain grow, from the oldest to the newest).
check_series() {
    _cs_archive=$1 _cs_dir=$2 _cs_max=$3 _cs_want=$4
    shift 4
    "$TRAJPACK" verify -q "$_cs_archive" > "$TEST_TMP/verify.out" 2>&1 ||
        { cat "$TEST_TMP/verify.out" >&2; fail "verify failed after adding $#"; }
    _cs_i=0
    for _cs_step in "$@"; do
        _cs_i=$((_cs_i + 1))
        _cs_path=run/step-$_cs_step.safetensors
        read_back "$_cs_archive" "$_cs_dir" "$_cs_step" \
            "after adding $# checkpoints (--max-chain $_cs_max)"
        _cs_share=$(delta_share "$_cs_archive" "$_cs_path")
        if [ "$_cs_i" -eq $# ]; then
            [ "$_cs_share" = 0 ] && [ "$(chunks_with_reference "$_cs_archive" "$_cs_path")" = 0 ] ||
                fail "the newest, $_cs_path, is not keyframes (delta $_cs_share%)"
        elif [ "$_cs_i" -gt "$_cs_max" ] &&
            [ $(((_cs_i - _cs_max - 1) % (2 * _cs_max + 1))) -eq 0 ]; then
            [ "$_cs_share" -lt 50 ] ||
                fail "$_cs_path, a keyframe for good with --max-chain $_cs_max, is delta $_cs_share%"
        else
            [ "$_cs_share" -ge 50 ] ||
                fail "$_cs_path is delta $_cs_share% only (--max-chain $_cs_max, $# added)"
        fi
    done
    [ "$_cs_want" != grown ] || _cs_want=$(($# - 1 < _cs_max ? $# - 1 : _cs_max))
    _cs_chain=$(stats_number "$_cs_archive" longest)
    [ "$_cs_chain" = "$_cs_want" ] ||
        fail "longest chain $_cs_chain after $# checkpoints with --max-chain $_cs_max, expected $_cs_want"
}
