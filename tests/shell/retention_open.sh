#!/bin/sh
# A descriptor opened before its file is removed, now that a removal
# gives the file's space back at once:
# 1. in a writable mount, a checkpoint opened, then removed through the
#    same mount (rm), then read: it reads the version it opened, whole
#    (trajfs(1): "A descriptor opened for reading reads the version
#    committed when it was opened, whole, until it is closed"): the
#    mount keeps what its open files read, and gives it back once they
#    close, which the test waits for;
# 2. in a following read-only mount, a checkpoint opened, then removed
#    by another writer (remove_paths of retentionlib.sh), which cannot
#    know it is open: the read gives the bytes it opened or fails with
#    EIO, never other bytes, and the daemon says why (not "damaged").
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/retentionlib.sh"

src=$TEST_TMP/src
generate_retention_run "$src/run"
full=$TEST_TMP/full.traj
"$TRAJPACK" create -q "$full" "$src/run" || fail "create failed"
victim=run/step-000050.optim.safetensors
failures=""

# ---- 1. a writable mount --------------------------------------------------------------

archive=$TEST_TMP/a.traj
cp "$full" "$archive"
mnt=$TEST_TMP/rw
start_mount "$archive" "$mnt" -o rw
exec 3< "$mnt/$victim"
rm "$mnt/$victim"
before_close=$(held "$archive")
if ! cmp - "$src/$victim" <&3 > "$TEST_TMP/cmp" 2>&1; then
    failures="$failures
writable mount: a descriptor opened before rm reads: $(cat "$TEST_TMP/cmp"); the daemon: $(grep -v unmounted "$mnt.log" | head -n 2)"
fi
exec 3<&-
# The close gives back what only the descriptor read: the archive holds
# less (a job on the committer thread; waited for, not slept on).
given_back() { [ "$(held "$archive")" -lt "$before_close" ]; }
FOLLOW=0
wait_for "the space kept for the open file, once it closed" given_back > /dev/null
stop_mount "$mnt"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after the give-back failed"

# ---- 2. a following mount ----------------------------------------------------------------

archive=$TEST_TMP/b.traj
cp "$full" "$archive"
mnt=$TEST_TMP/follow
start_mount "$archive" "$mnt" -o follow=1
follow_pid=$DAEMON_PID
exec 3< "$mnt/$victim"
remove_paths "$archive" "$victim"
"$PYTHON" - "$src/$victim" 3 > "$TEST_TMP/read" 2>&1 <<'PY' ||
import errno, os, sys
want = open(sys.argv[1], "rb").read()
fd = int(sys.argv[2])
got = b""
try:
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        got += b
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("read failed with %s, not EIO" % e)
    if got != want[:len(got)]:
        sys.exit("other bytes before the EIO")
    print("eio")
    sys.exit(0)
if got != want:
    sys.exit("other bytes: %d read, %d expected" % (len(got), len(want)))
print("whole")
PY
    failures="$failures
following mount: a descriptor opened before the removal: $(cat "$TEST_TMP/read")"
if grep -q eio "$TEST_TMP/read" &&
   ! grep -q "removed or replaced in the archive since it was opened" "$mnt.log"; then
    failures="$failures
following mount: an EIO the daemon does not explain: $(grep -v 'unmounted\|follow: look' "$mnt.log" | head -n 2)"
fi
exec 3<&-
DAEMON_PID=$follow_pid
stop_mount "$mnt"

[ -z "$failures" ] || fail "$failures"
exit 0
