#!/bin/sh
# Crashes and a full disk under the writable mount.
# 1. kill -9 of the daemon while a training loop commits 50 checkpoints
#    through it, at a different moment in each of three rounds: the
#    archive opens and verifies, every checkpoint whose close() returned
#    success is there, byte-identical, and no other file is listed but
#    whole ones (a commit may be durable before its reply).
# 2. The archive on a small tmpfs (root only): the close() of a file that
#    does not fit fails with ENOSPC, nothing of it stays, the mount goes
#    on, and the archive holds all the rest.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt
plain=$TEST_TMP/plain
mkdir "$plain"
"$PYTHON" "$WRITE_CHECKPOINTS" "$plain" 1 50 100000 || fail "write_checkpoints.py failed"

# ---- 1. kill -9 ----
for round in 1 2 3; do
    start_mount "$archive" "$mnt" -o rw
    mkdir "$mnt/r$round"
    log=$TEST_TMP/committed.$round
    : > "$log"
    "$PYTHON" "$WRITE_CHECKPOINTS" --log "$log" "$mnt/r$round" 1 50 100000 2> /dev/null &
    writer=$!
    # A random moment: after 3 to 33 commits (of some 30 ms each here),
    # and up to 30 ms more.
    target=$(awk -v s="$$$round" 'BEGIN { srand(s); print 3 + int(rand() * 31) }')
    for _ in $(seq 1000); do
        [ "$(wc -l < "$log")" -ge "$target" ] && break
        sleep 0.01
    done
    sleep "0.0$(awk -v s="$$$round" 'BEGIN { srand(s + 1); print int(rand() * 3) }')"
    kill -KILL "$DAEMON_PID"
    wait "$DAEMON_PID" 2> /dev/null || true
    if wait "$writer"; then fail "round $round: the writer finished all 50 commits before the kill"; fi
    fusermount3 -u "$mnt" 2> /dev/null || fusermount3 -uz "$mnt"
    "$TRAJPACK" verify -q "$archive" > /dev/null 2> "$TEST_TMP/err" ||
        fail "round $round: verify after kill -9: $(cat "$TEST_TMP/err")"
    "$TRAJPACK" list "$archive" | sed -n "s|^r$round/\(.\)|\1|p" > "$TEST_TMP/listed"
    [ "$(wc -l < "$log")" -ge 3 ] || fail "round $round: only $(wc -l < "$log") commits before the kill"
    while read -r name; do
        grep -qx "$name" "$TEST_TMP/listed" || fail "round $round: $name was committed but is gone"
    done < "$log"
    while read -r name; do
        "$TRAJPACK" extract -q "$archive" "r$round/$name" -O | cmp -s - "$plain/$name" ||
            fail "round $round: $name is listed but not whole"
    done < "$TEST_TMP/listed"
    echo "$TEST_NAME: round $round: killed after $(wc -l < "$log") commits; $(wc -l < "$TEST_TMP/listed") files listed"
done

# ---- 2. a full disk ----
if [ "$(id -u)" != 0 ]; then
    echo "$TEST_NAME: not root: the full disk check skipped (it mounts a tmpfs)"
    exit 0
fi
small=$TEST_TMP/small
mkdir "$small" "$TEST_TMP/spool"
mount -t tmpfs -o size=2m trajfs-test "$small" || fail "cannot mount a tmpfs"
trap 'mount_cleanup; umount "$small" 2> /dev/null; rm -rf "$TEST_TMP"' EXIT
# Spooled on the large disk: the writes succeed, the commit cannot.
start_mount "$small/a.traj" "$mnt" -o rw,spool_dir="$TEST_TMP/spool"
cp "$plain/step-1.safetensors" "$mnt/" || fail "a small file did not fit"
"$PYTHON" - "$mnt" <<'PY' || fail "full disk (above)"
import errno, os, sys
mnt = sys.argv[1]
big = os.path.join(mnt, "big.bin")
f = open(big, "wb")
f.write(os.urandom(3 << 20))
try:
    f.close()
    sys.exit("a file larger than the disk closed without an error")
except OSError as e:
    assert e.errno == errno.ENOSPC, "close gave %s, not ENOSPC" % e
assert not os.path.exists(big), "the file that did not fit is there"
PY
cp "$plain/step-2.safetensors" "$mnt/" || fail "the mount did not go on after ENOSPC"
stop_mount "$mnt"
"$TRAJPACK" verify -q "$small/a.traj" > /dev/null || fail "verify after ENOSPC failed"
[ "$("$TRAJPACK" list "$small/a.traj" | tr '\n' ' ')" = "step-1.safetensors step-2.safetensors " ] ||
    fail "after ENOSPC the archive lists: $("$TRAJPACK" list "$small/a.traj")"
for i in 1 2; do
    "$TRAJPACK" extract -q "$small/a.traj" "step-$i.safetensors" -O | cmp -s - "$plain/step-$i.safetensors" ||
        fail "step $i differs after ENOSPC"
done
exit 0
