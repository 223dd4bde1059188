#!/bin/sh
# Crashes, a full disk and a failing device under the writable mount:
# what a close() reported as committed survives anything after it.
#
# 1. kill -9 of the daemon at random moments while a writer copies
#    checkpoints into it with cp, one commit each, logging every cp that
#    exited 0 (its close() returned success). Each trial mounts the
#    archive, starts the writer, kills the daemon after a random delay
#    spread over the time the trial's copies take here (timed on an
#    unkilled trial), and unmounts. Then the archive opens, `verify`
#    passes, every logged file is listed, and every listed file extracts
#    byte-identical to its source (no partial file). The next trial mounts
#    the same archive (cutting any torn tail), reads the last logged file
#    through the mount (as its source; this also decodes the next
#    commit's parent into the cache the writer shares, so that the kills
#    fall on the commits rather than on that), and goes on from the first
#    file not logged; a new archive starts when all are in. The files
#    alternate between checkpoints, whose commits (small chunks of 2^12
#    elements) append a dozen blobs before the catalog and trailer, and
#    1 MiB of random bytes (optimizer state, say), whose commits are
#    mostly writes and fdatasync. Just before each kill the kernel
#    stacks of the writer's cp and of the daemon's threads are sampled:
#    a cp in fuse_flush is a kill inside a commit (requested, not yet
#    answered), a daemon thread in fsync a kill inside the commit's
#    fdatasync. RWKILL_TRIALS sets the number of kills (default 200).
#    The moments come from timing an unkilled trial, and under a changing
#    load they may all miss the short end of the commits (their writes,
#    fdatasync and reply). So every KILL_AIM-th kill is timed by the
#    archive's writes instead (tests/tools/killonwrite, faultlib.sh), 0 to
#    7 writes into a commit (when the writer's copies end first, its kill
#    comes after them); and if no kill hit the end of a commit, up to as
#    many kills again are made, until one does.
# 2. The archive on a small tmpfs: the close() of a file that does not fit
#    fails with ENOSPC, nothing of it stays, the mount goes on, and the
#    archive holds all the rest.
# 3. The archive on a device that fails writes: ext4 on a loop device
#    whose backing file lies on a full tmpfs (as in killadd.sh). Copies
#    go on until a close() fails; then the daemon unmounts cleanly and,
#    the device remounted, the archive holds every file whose close()
#    succeeded.
# Parts 2 and 3 need root (mount, losetup): they print SKIP otherwise.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"
. "$(dirname "$0")/faultlib.sh"

TRIALS=${RWKILL_TRIALS:-200}
PER_TRIAL=6   # copies started per trial
NFILES=40     # checkpoints of the source trajectory
ELEMENTS=120000
STATE_BYTES=1048576

plain=$TEST_TMP/plain
mnt=$TEST_TMP/mnt
mkdir "$plain"
"$PYTHON" "$WRITE_CHECKPOINTS" "$plain" 1 "$NFILES" "$ELEMENTS" || fail "write_checkpoints.py failed"
# Each checkpoint with a file of random bytes, stored raw.
for i in $(seq 1 "$NFILES"); do
    head -c "$STATE_BYTES" /dev/urandom > "$plain/state-$i.bin"
    printf 'step-%s.safetensors\nstate-%s.bin\n' "$i" "$i"
done > "$TEST_TMP/files"

cleanup() {
    mount_cleanup # the trajfs mounts first
    fault_cleanup
    rm -rf "$TEST_TMP"
}
trap cleanup EXIT

# new_archive PATH LOG: an archive of the first checkpoint with small
# chunks (so that the mount's commits are deltas appending many blobs),
# and its log.
new_archive() {
    rm -f "$1"
    "$TRAJPACK" create -q --chunk-shift 12 --as run/step-1.safetensors "$1" "$plain/step-1.safetensors" ||
        fail "create $1 failed"
    echo run/step-1.safetensors > "$2"
}

# start_writer DIR LOG FILE...: copies each $plain/FILE to DIR/FILE in the
# background, in order, logging run/FILE after each cp that exits 0 and
# the PID of the running cp in $TEST_TMP/cp.pid; stops at the first
# failure. Sets WRITER.
start_writer() {
    _dir=$1 _log=$2
    shift 2
    sh -c '
        src=$1 dir=$2 log=$3 pidfile=$4
        shift 4
        for f; do
            cp "$src/$f" "$dir/$f" &
            echo $! > "$pidfile"
            wait $! || exit 1
            echo "run/$f" >> "$log"
        done' rwkill "$plain" "$_dir" "$_log" "$TEST_TMP/cp.pid" "$@" 2> "$TEST_TMP/writer.err" &
    WRITER=$!
}

# mount_warm ARCHIVE LOG: mounts the archive and reads the last logged
# checkpoint through the mount, byte for byte as its source: the
# reconstruction of the next checkpoint's parent, warming the cache the
# mount shares with its writer, does not fall within the kill moments.
mount_warm() {
    start_mount "$1" "$mnt" -o rw
    _last=$(grep '\.safetensors$' "$2" | tail -n 1)
    cmp -s "$mnt/$_last" "$plain/${_last#run/}" || fail "$_last read through the mount differs"
}

# The next PER_TRIAL files after the logged ones.
next_files() {
    _done=$(wc -l < "$1")
    sed -n "$((_done + 1)),$((_done + PER_TRIAL))p" "$TEST_TMP/files"
}

# ---- 1. kill -9 at random moments ---------------------------------------------

archive=$TEST_TMP/a.traj
log=$TEST_TMP/committed
new_archive "$archive" "$log"

# Two trials without a kill; the second times the copies (the first one's
# first commit, a delta against the keyframe, takes far longer).
for unkilled in 1 2; do
    mount_warm "$archive" "$log"
    start=$(date +%s%N)
    # shellcheck disable=SC2046
    start_writer "$mnt/run" "$log" $(next_files "$log")
    wait "$WRITER" || fail "the unkilled writer failed: $(cat "$TEST_TMP/writer.err")"
    span=$(($(date +%s%N) - start)) # ns
    stop_mount "$mnt"
    check_archive "$archive" "$log" "$plain" run/ "unkilled trial $unkilled"
done
[ "$(wc -l < "$log")" -eq $((2 * PER_TRIAL + 1)) ] || fail "the unkilled trials logged $(wc -l < "$log") files"

awk -v n="$((2 * TRIALS))" -v span="$span" 'BEGIN { srand(11); for (i = 0; i < n; i++) printf "%.4f\n", rand() * span / 1e9 }' \
    > "$TEST_TMP/delays"
trial=0 archives=1 in_commit=0 in_fsync=0 torn=0 unreported=0 missed=0 aimed=0
stacks_seen=false
start=$(date +%s)
# Whether some kill hit a commit's writes, its fdatasync or its reply.
hit_commit_end() {
    [ "$TRIALS" -lt 50 ] || [ $((torn + in_fsync + unreported)) -ge 1 ]
}
while IFS= read -r delay; do
    if [ "$trial" -ge "$TRIALS" ] && hit_commit_end; then
        break
    fi
    trial=$((trial + 1))
    skip=$(kill_skip "$trial") # the kill's moment: write $skip + 1 of the archive, or $delay
    if [ "$skip" -ge 0 ]; then
        what="trial $trial (kill at write $((skip + 1)) of the archive)"
    else
        what="trial $trial (kill after $delay s)"
    fi
    if [ "$(wc -l < "$log")" -ge $((2 * NFILES)) ]; then # all in: start over
        new_archive "$archive" "$log"
        archives=$((archives + 1))
    fi
    logged=$(wc -l < "$log")
    : > "$TEST_TMP/cp.pid"
    mount_warm "$archive" "$log"
    : > "$TEST_TMP/stacks"
    if [ "$skip" -ge 0 ]; then
        "$KILLONWRITE" "$archive" "$DAEMON_PID" "$skip" 30000 > "$TEST_TMP/killer.out" &
        killer=$!
        until [ -s "$TEST_TMP/killer.out" ]; do
            kill -0 "$killer" 2> /dev/null || fail "$what: killonwrite did not start"
            sleep 0.01
        done
        # shellcheck disable=SC2046
        start_writer "$mnt/run" "$log" $(next_files "$log")
        writer_rc=0
        wait "$WRITER" || writer_rc=$?
        # The writer ends at the kill, or, when inotify merged writes the
        # killer was too slow to read one by one (a loaded machine), after
        # its last copy: then the killer is stopped and the daemon killed
        # now, a kill after the copies.
        if [ "$writer_rc" -eq 0 ]; then
            kill "$killer" 2> /dev/null || true
            wait "$killer" 2> /dev/null || true
            kill -KILL "$DAEMON_PID" 2> /dev/null || true # (gone if the killer was first)
        elif wait "$killer"; then
            aimed=$((aimed + 1))
        fi
    else
        # shellcheck disable=SC2046
        start_writer "$mnt/run" "$log" $(next_files "$log")
        sleep "$delay"
        read -r cp_pid < "$TEST_TMP/cp.pid" || cp_pid=0
        cat "/proc/$cp_pid/stack" "/proc/$DAEMON_PID"/task/*/stack > "$TEST_TMP/stacks" 2> /dev/null || true
        kill -KILL "$DAEMON_PID"
        writer_rc=0
        wait "$WRITER" || writer_rc=$?
    fi
    wait "$DAEMON_PID" 2> /dev/null || true
    forget_daemon "$DAEMON_PID"
    if [ "$writer_rc" -eq 0 ]; then
        missed=$((missed + 1))
    elif ! grep -q 'Transport endpoint is not connected\|Software caused connection abort' "$TEST_TMP/writer.err"; then
        fail "$what: the writer failed otherwise: $(cat "$TEST_TMP/writer.err")"
    fi
    fusermount3 -u "$mnt" 2> /dev/null || fusermount3 -uz "$mnt" || fail "$what: cannot unmount"
    [ -s "$TEST_TMP/stacks" ] && stacks_seen=true
    grep -q fuse_flush "$TEST_TMP/stacks" && in_commit=$((in_commit + 1))
    grep -q fsync "$TEST_TMP/stacks" && in_fsync=$((in_fsync + 1))
    check_archive "$archive" "$log" "$plain" run/ "$what"
    grep -q 'after the last commit are ignored' "$TEST_TMP/verify" && torn=$((torn + 1))
    # Durable before its reply reached cp: listed but not logged.
    now_listed=$(grep -c '^run/.' "$TEST_TMP/list")
    [ "$now_listed" -gt "$(wc -l < "$log")" ] && unreported=$((unreported + 1))
    [ "$(wc -l < "$log")" -ge "$logged" ] || fail "$what: the log shrank"
done < "$TEST_TMP/delays"
[ "$trial" -ge "$TRIALS" ] || fail "ran $trial trials, fewer than $TRIALS"
is_mounted "$mnt" && fail "$mnt still mounted"
echo "$TEST_NAME: $trial kills in $(($(date +%s) - start)) s ($aimed timed by the archive's writes;" \
    "$in_commit inside a commit, $in_fsync in its fdatasync," \
    "$torn left a torn commit, $unreported a commit durable before its reply, $missed after the writer's $PER_TRIAL copies" \
    "of $((span / 1000000)) ms), $archives archives, $bytes_checked bytes compared"
# The moments come from timing an unkilled trial, so under a changing load
# fewer of them land inside a commit; the bounds only catch moments that
# miss the commits altogether.
$stacks_seen || echo "NOTE: $TEST_NAME: no kernel stacks readable: kills inside commits not counted"
if $stacks_seen && [ "$in_commit" -lt $((trial / 10)) ]; then
    fail "only $in_commit of $trial kills hit a commit in progress"
fi
hit_commit_end ||
    fail "no kill of $trial hit a commit's writes, its fdatasync or its reply: the moments are too coarse"

# ---- 2. a full disk ------------------------------------------------------------

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: $TEST_NAME: not root: the full disk and device error parts (they mount file systems)"
    exit 0
fi
small=$TEST_TMP/small
mkdir "$small" "$TEST_TMP/spool"
mount -t tmpfs -o size=2m trajfs-test "$small" || fail "cannot mount a tmpfs"
SMALL_MOUNT=$small
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
echo "$TEST_NAME: ENOSPC: the close() of a file larger than the disk failed; the archive holds the rest"

# ---- 3. a device that fails writes back --------------------------------------------

for attempt in 1 2 3 4; do
    [ "$attempt" -lt 4 ] || fail "device error: the filesystem lost the archive file on 3 disks"
    failing_disk 6m 64M || exit 0
    disk=$DISK_MOUNT
    new_archive "$disk/a.traj" "$TEST_TMP/disk.log"
    start_mount "$disk/a.traj" "$mnt" -o rw,spool_dir="$TEST_TMP/spool"
    failed=""
    while IFS= read -r f; do
        [ "$f" = step-1.safetensors ] && continue
        if ! cp "$plain/$f" "$mnt/run/$f" 2> "$TEST_TMP/cp.err"; then
            failed=$f
            break
        fi
        echo "run/$f" >> "$TEST_TMP/disk.log"
    done < "$TEST_TMP/files"
    [ -n "$failed" ] || fail "device error: every checkpoint fitted"
    grep -qE 'Input/output error|No space left on device' "$TEST_TMP/cp.err" ||
        fail "device error: the failed cp says: $(cat "$TEST_TMP/cp.err")"
    [ "$(wc -l < "$TEST_TMP/disk.log")" -ge 3 ] || fail "device error: too few commits before it"
    stop_mount "$mnt"
    remount_disk
    disk_kept "$disk/a.traj" && break
    drop_disk
done
check_archive "$disk/a.traj" "$TEST_TMP/disk.log" "$plain" run/ "after the device error, remounted"
echo "$TEST_NAME: device write error after $(wc -l < "$TEST_TMP/disk.log") files: $(cat "$TEST_TMP/cp.err")"
echo "$TEST_NAME: $bytes_checked bytes compared with their sources"
exit 0
