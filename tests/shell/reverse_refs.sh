#!/bin/sh
# Reference chains (trajpack(1), REFERENCE CHAINS): checkpoints of a
# run added one at a time read back byte for byte after every add and
# pass verify; the newest is keyframes and the earlier ones deltas, the
# (N + 1)'th and every (2N + 1)'th after it keyframes for good, the
# first N reverse deltas against their successors, then windows of N
# forward deltas against their predecessors and N reverse ones, the
# longest chain within --max-chain N (1, 2 and the default); with
# --max-chain 4096 each is a forward delta against the one before, the
# newest too. A checkpoint older than the newest, added after it, is a
# forward delta and reads back, as does everything once a newer one
# comes. Copied one after another into a read-write mount, the same
# layout. A following
# mount reads the newest right while newer checkpoints are added and
# retire its keyframes. (What retiring gives back, and readers whose view
# predates it: reverse_refs_holes.sh.)
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/reverselib.sh"

src=$TEST_TMP/src
generate_series "$src"

# ---- trajpack add, one checkpoint at a time ----
for max in 1 2 default; do
    archive=$TEST_TMP/chain-$max.traj
    opt=
    [ "$max" = default ] || opt="--max-chain $max"
    "$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
    added=
    for step in $STEPS; do
        # shellcheck disable=SC2086 # $opt is empty or two words
        "$TRAJPACK" add -q $opt --as "run/step-$step.safetensors" "$archive" \
            "$src/step-$step.safetensors" || fail "add of step $step failed (--max-chain $max)"
        added="$added $step"
        # shellcheck disable=SC2086 # the steps, one word each
        check_series "$archive" "$src" "$([ "$max" = default ] && echo 16 || echo "$max")" grown \
            $added
    done
    echo "--max-chain $max: longest chain $(stats_number "$archive" longest)," \
        "$(stats_number "$archive" retired_bytes) bytes of keyframes retired," \
        "archive $(file_size "$archive") bytes"
done

# ---- --max-chain 4096: each a forward delta, the newest too ----
archive=$TEST_TMP/chain-4096.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
for step in $STEPS; do
    "$TRAJPACK" add -q --max-chain 4096 --as "run/step-$step.safetensors" "$archive" \
        "$src/step-$step.safetensors" || fail "add of step $step failed (--max-chain 4096)"
done
"$TRAJPACK" verify -q "$archive" || fail "verify failed (--max-chain 4096)"
for step in $STEPS; do
    path=run/step-$step.safetensors
    read_back "$archive" "$src" "$step" "(--max-chain 4096)"
    share=$(delta_share "$archive" "$path")
    if [ "$step" = 000002 ]; then
        [ "$share" -lt 50 ] || fail "the first, $path, is delta $share% (--max-chain 4096)"
    else
        [ "$share" -ge 50 ] || fail "$path is delta $share% only (--max-chain 4096)"
    fi
done
[ "$(stats_number "$archive" retired_bytes)" = 0 ] ||
    fail "--max-chain 4096 retired keyframes: the newest was one"
[ "$(stats_number "$archive" longest)" = 5 ] ||
    fail "longest chain $(stats_number "$archive" longest) of 6 forward deltas, expected 5"

# ---- an older checkpoint after a newer one ----
archive=$TEST_TMP/order.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
for step in 000002 000004 000008 000006 000010; do
    "$TRAJPACK" add -q --as "run/step-$step.safetensors" "$archive" \
        "$src/step-$step.safetensors" || fail "add of step $step failed"
    if [ "$step" = 000006 ]; then
        # A forward delta against step 4, its nearest earlier checkpoint;
        # step 8 stays the newest's keyframes.
        [ "$(delta_share "$archive" run/step-000006.safetensors)" -ge 50 ] ||
            fail "step 6, added after step 8, is not stored as deltas"
        [ "$(chunks_with_reference "$archive" run/step-000008.safetensors)" = 0 ] ||
            fail "adding step 6 after step 8 made step 8 deltas"
        # Chains: 2 -> 4 -> 8 and 6 -> 4 -> 8.
        check_series "$archive" "$src" 16 2 000002 000004 000006 000008
    fi
done
# Step 8 became deltas against step 10 (step 6, the checkpoint before
# it, is a delta against it through step 4); step 6 reaches step 10
# through steps 4 and 8.
check_series "$archive" "$src" 16 3 000002 000004 000006 000008 000010

# ---- a read-write mount ----
. "$(dirname "$0")/mountlib.sh"
archive=$TEST_TMP/rw.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
rw=$TEST_TMP/rw
start_mount "$archive" "$rw" -o rw
mkdir "$rw/run"
for step in $STEPS; do
    cp "$src/step-$step.safetensors" "$rw/run/" || fail "cp of step $step into the rw mount failed"
    cmp "$rw/run/step-$step.safetensors" "$src/step-$step.safetensors" ||
        fail "step $step reads other bytes in the rw mount"
done
for step in $STEPS; do
    cmp "$rw/run/step-$step.safetensors" "$src/step-$step.safetensors" ||
        fail "step $step reads other bytes in the rw mount once all are in"
done
stop_mount "$rw"
# shellcheck disable=SC2086 # the steps, one word each
check_series "$archive" "$src" 16 grown $STEPS

# ---- a following mount reads the newest while newer ones come ----
FOLLOW=1
export TRAJFS_FOLLOW_TRACE=1
archive=$TEST_TMP/follow.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
"$TRAJPACK" add -q --as run/step-000002.safetensors "$archive" "$src/step-000002.safetensors" ||
    fail "add failed"
mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o follow=$FOLLOW
prev=000002
for step in 000004 000006 000008 000010 000012; do
    cmp "$mnt/run/step-$prev.safetensors" "$src/step-$prev.safetensors" ||
        fail "the newest, step $prev, reads other bytes"
    "$TRAJPACK" add -q --as "run/step-$step.safetensors" "$archive" \
        "$src/step-$step.safetensors" || fail "add of step $step failed"
    # Whether or not the mount has applied the commit yet.
    cmp "$mnt/run/step-$prev.safetensors" "$src/step-$prev.safetensors" ||
        fail "step $prev reads other bytes once step $step was added"
    wait_for "step $step" test -e "$mnt/run/step-$step.safetensors" > /dev/null
    prev=$step
done
followed "$mnt.log"
for step in $STEPS; do
    cmp "$mnt/run/step-$step.safetensors" "$src/step-$step.safetensors" ||
        fail "step $step reads other bytes in the following mount"
done
stop_mount "$mnt"
! grep -Ei 'error|not applied' "$mnt.log" "$rw.log" || fail "a daemon reported an error"
no_sanitizer_report "$mnt.log" "$rw.log"
echo "ok"
