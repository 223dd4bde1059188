#!/bin/sh
# What retiring keyframes gives back (reverse references, trajfs(5)):
# once a newer checkpoint's commit is durable, the payloads of the
# keyframes it replaced by deltas are holes in the archive file (SEEK_HOLE
# finds them, and fewer bytes are allocated than its size). Readers whose
# view of the archive predates that commit: a read-only mount that does
# not follow reads the retired file's bytes right or fails with EIO and a
# log line naming it, never other bytes; a following mount that has not
# looked yet applies the commit when such a read fails and reads right.
# Where the tests' file system cannot punch holes, there is nothing to
# give back or to miss: the test is skipped.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/reverselib.sh"

# The bytes of the holes of FILE before its end (SEEK_HOLE, SEEK_DATA).
hole_bytes() {
    "$PYTHON" - "$1" << 'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
end, at, holes = os.fstat(fd).st_size, 0, 0
while at < end:
    hole = os.lseek(fd, at, os.SEEK_HOLE)
    if hole >= end:
        break
    try:
        data = os.lseek(fd, hole, os.SEEK_DATA)
    except OSError:  # a hole up to the end
        data = end
    holes += data - hole
    at = data
print(holes)
EOF
}

probe=$TEST_TMP/probe
head -c 65536 /dev/urandom > "$probe"
sync "$probe"
if ! fallocate --punch-hole --keep-size --offset 8192 --length 32768 "$probe" 2> /dev/null ||
    [ "$(hole_bytes "$probe")" -eq 0 ]; then
    echo "SKIP: $TEST_NAME: the file system of $TEST_TMP cannot punch holes"
    exit 77
fi

src=$TEST_TMP/src
generate_series "$src" --width 64

# ---- the retired keyframes are holes ----
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
added=
for step in $STEPS; do
    "$TRAJPACK" add -q --as "run/step-$step.safetensors" "$archive" \
        "$src/step-$step.safetensors" || fail "add of step $step failed"
    added="$added $step"
    # shellcheck disable=SC2086 # the steps, one word each
    check_series "$archive" "$src" 16 grown $added
done
retired=$(stats_number "$archive" retired_bytes)
holes=$(hole_bytes "$archive")
size=$(file_size "$archive")
allocated=$(($(stat -c '%b * %B' "$archive")))
echo "$retired bytes of keyframes retired; holes: $holes bytes; archive $size bytes, $allocated allocated"
[ "$retired" -gt 0 ] || fail "no keyframes were retired"
[ "$holes" -gt 0 ] || fail "none of the $retired bytes retired were given back"
[ "$holes" -le "$retired" ] || fail "$holes bytes of holes, more than the $retired bytes retired"
[ "$allocated" -lt "$size" ] || fail "$allocated bytes allocated for an archive of $size bytes"
# A writer opening the archive gives back what is retired again (for a
# writer that died before it could): nothing changes, nothing breaks.
"$TRAJPACK" add -q --as notes.txt "$archive" "$src/config.json" || fail "add of a file failed"
[ "$(hole_bytes "$archive")" -ge "$holes" ] || fail "holes were filled by a later add"
# shellcheck disable=SC2086 # the steps, one word each
check_series "$archive" "$src" 16 grown $STEPS

# ---- views opened before a commit retired keyframes ----
. "$(dirname "$0")/mountlib.sh"
export TRAJFS_FOLLOW_TRACE=1
archive=$TEST_TMP/views.traj
"$TRAJPACK" create -q "$archive" "$src/config.json" || fail "create failed"
for step in 000002 000004; do
    "$TRAJPACK" add -q --as "run/step-$step.safetensors" "$archive" \
        "$src/step-$step.safetensors" || fail "add of step $step failed"
done
# Neither reads step 4, the newest, before step 6 retires its keyframes.
# The following one looks only when asked: its view stays the one it
# opened until a read fails.
still=$TEST_TMP/still
start_mount "$archive" "$still" -o follow=0,direct_io
still_pid=$DAEMON_PID
mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o follow=3600,direct_io
follow_pid=$DAEMON_PID
"$TRAJPACK" add -q --as run/step-000006.safetensors "$archive" "$src/step-000006.safetensors" ||
    fail "add of step 6 failed"
[ "$(chunks_with_reference "$archive" run/step-000004.safetensors)" -gt 0 ] ||
    fail "adding step 6 left step 4 keyframes"

if cat "$still/run/step-000004.safetensors" > "$TEST_TMP/still.out" 2> "$TEST_TMP/still.err"; then
    cmp "$TEST_TMP/still.out" "$src/step-000004.safetensors" ||
        fail "a mount whose view predates the redirect reads other bytes"
    echo "the mount that does not follow read step 4 right"
else
    grep -q "Input/output error" "$TEST_TMP/still.err" ||
        fail "reading step 4 failed, but not with EIO: $(cat "$TEST_TMP/still.err")"
    grep -q "run/step-000004.safetensors" "$still.log" ||
        fail "EIO without a log line naming the file: $(cat "$still.log")"
    echo "the mount that does not follow: EIO, logged: $(grep -m 1 step-000004 "$still.log")"
fi

cmp "$mnt/run/step-000004.safetensors" "$src/step-000004.safetensors" ||
    fail "the following mount does not read step 4 right"
grep -q "follow: look 1 done (asked by a failed read)" "$mnt.log" ||
    fail "the following mount read step 4 without applying the commit: $(cat "$mnt.log")"
# The look applied the commit: step 6 shows, without waiting.
cmp "$mnt/run/step-000006.safetensors" "$src/step-000006.safetensors" ||
    fail "the following mount does not show step 6 after its look"
[ "$(grep -c "follow: look" "$mnt.log")" = 1 ] || fail "more looks than the one asked for"

DAEMON_PID=$follow_pid
stop_mount "$mnt"
DAEMON_PID=$still_pid
stop_mount "$still"
! grep -Ei 'error|not applied' "$mnt.log" || fail "the following mount reported an error"
no_sanitizer_report "$mnt.log" "$still.log"
echo "ok"
