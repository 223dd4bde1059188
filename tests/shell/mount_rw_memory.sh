#!/bin/sh
# A writable mount commits in memory that does not grow with the file:
# two checkpoints of one bf16 tensor of 2^26 elements (128 MiB each, the
# second a small update of the first) copied into a mount with a 16 MiB
# cache are committed, the first re-encoded as deltas against the second
# when it comes, while the daemon's peak resident memory (VmHWM) stays
# under 128 MiB (holding a file and its parent whole, as the committer
# once did, takes 256 MiB); both read back byte-identical.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

src=$TEST_TMP/src
mkdir -p "$src/run"
"$PYTHON" "$top_srcdir/tests/tools/big_pair.py" "$src/run" $((1 << 26)) ||
    fail "generating the checkpoints failed"
archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o rw,cache_size=16M,threads=2
for step in 1 2; do # in step order: step 2's references are step 1's
    cp "$src/run/step-$step.safetensors" "$mnt/" || fail "cp of step $step failed"
done
peak_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DAEMON_PID/status")
for step in 1 2; do
    cmp "$src/run/step-$step.safetensors" "$mnt/step-$step.safetensors" ||
        fail "step $step reads back otherwise"
done
stop_mount "$mnt"
echo "$TEST_NAME: committed 2 x 128 MiB with a 16 MiB cache: peak RSS $((peak_kib / 1024)) MiB"
[ "$peak_kib" -lt $((128 * 1024)) ] || fail "the daemon's peak RSS was $peak_kib KiB"
# step 1 was re-encoded as deltas against step 2, the newest (reverse
# references): about a third of step 2's bytes
"$TRAJPACK" list -l "$archive" > "$TEST_TMP/list" || fail "trajpack list failed"
awk '$NF == "step-1.safetensors" { print }' "$TEST_TMP/list" | grep -q ulp ||
    fail "step 1 is not stored as deltas: $(cat "$TEST_TMP/list")"
exit 0
