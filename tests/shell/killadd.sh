#!/bin/sh
# Crash and fault injection of `trajpack add`: what an add reported as
# done survives anything that happens after it.
#
# 1. kill -9 at random moments: each trial adds checkpoints one by one
#    (one commit each) in the background, logging every add that exited 0,
#    and kills the adds (process group) at a random moment; every
#    KILL_AIM-th trial at the 1st to 8th write of the archive instead
#    (tests/tools/killonwrite), inside a commit's writes, which moments
#    timed by the clock rarely hit. Then the archive opens, `verify`
#    passes, every logged file is listed, and every listed file extracts
#    byte-identical to its source (no partial file). The next trial
#    appends to the same archive (cutting the torn tail).
# 2. ENOSPC: the archive on a 256 KiB tmpfs; adds until one fails. It must
#    say "No space left on device", and the archive must still open,
#    verify and hold every earlier file, and no byte of the failed add;
#    once space is freed, the next add succeeds.
# 3. A device that fails writes: ext4 on a loop device whose backing file
#    lies on a full tmpfs. write() succeeds into the page cache and the
#    block layer fails the writeback ("Buffer I/O error" in the kernel
#    log), which fsync reports: the commit must fail saying so, and after
#    a remount the archive holds every earlier file. (dm-error would give
#    EIO proper; where the kernel has no device-mapper, as in the usual
#    container, this is the closest device-level failure. The loop
#    driver reports a full backing store as ENOSPC.)
# Parts 2 and 3 need root (mount, losetup): they print SKIP otherwise.
# KILLADD_TRIALS sets the number of kills (default 200).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/faultlib.sh"

TRIALS=${KILLADD_TRIALS:-200}
PER_TRIAL=6 # adds started per trial

traj=$TEST_TMP/traj
generate_trajectory "$traj" --layers 1 --width 32 --heads 2 --ctx 16 --batch 2 \
    --steps 24 --interval 2 --max-chars 20000 --dtype bf16,fp32
(cd "$traj" && find . -name '*.safetensors' | sed 's|^\./||' | LC_ALL=C sort) > "$TEST_TMP/files"
nfiles=$(wc -l < "$TEST_TMP/files")
[ "$nfiles" -ge 20 ] || fail "the generator wrote $nfiles checkpoints"

trap 'fault_cleanup; rm -rf "$TEST_TMP"' EXIT
trap 'exit 1' INT TERM HUP

# new_archive PATH LOG: an archive of config.json (small chunks: many
# blobs, so commits append many pieces), and an empty log.
new_archive() {
    rm -f "$1"
    "$TRAJPACK" create -q --chunk-shift 10 "$1" "$traj/config.json" || fail "create $1 failed"
    echo config.json > "$2"
}

# add_one ARCHIVE FILE LOG: adds $traj/FILE as FILE and logs it when the
# add exits 0; returns the add's status.
add_one() {
    "$TRAJPACK" add -q --as "$2" "$1" "$traj/$2" 2> "$TEST_TMP/add.err" || return $?
    echo "$2" >> "$3"
}

# ---- 1. kill -9 at random moments ---------------------------------------------

archive=$TEST_TMP/kill.traj
log=$TEST_TMP/kill.log
new_archive "$archive" "$log"
# Kill moments spread over three quarters of the time the trial's adds
# take here (timed on the first few), so that nearly every kill lands
# inside an add, in any of its phases.
start=$(date +%s%N)
for f in $(head -n 4 "$TEST_TMP/files"); do
    add_one "$archive" "$f" "$log" || fail "add $f failed: $(cat "$TEST_TMP/add.err")"
done
per_add=$(( ($(date +%s%N) - start) / 4 )) # ns
awk -v n="$TRIALS" -v span="$per_add" -v k="$PER_TRIAL" \
    'BEGIN { srand(7); for (i = 0; i < n; i++) printf "%.4f\n", rand() * 0.75 * k * span / 1e9 }' \
    > "$TEST_TMP/delays"
killed=0 torn=0 archives=1 trial=0
while IFS= read -r delay; do
    trial=$((trial + 1))
    skip=$(kill_skip "$trial") # the kill's moment: write $skip + 1 of the archive, or $delay
    done_count=$(wc -l < "$log")
    if [ "$done_count" -gt "$nfiles" ]; then # all added: start over
        new_archive "$archive" "$log"
        archives=$((archives + 1))
        done_count=1
    fi
    next=$(sed -n "${done_count},$((done_count + PER_TRIAL - 1))p" "$TEST_TMP/files")
    # A session of its own: one kill reaches the loop and its add at once.
    # shellcheck disable=SC2086
    setsid sh -c '
        trajpack=$1 archive=$2 traj=$3 log=$4
        shift 4
        for f; do
            "$trajpack" add -q --as "$f" "$archive" "$traj/$f" || exit 1
            echo "$f" >> "$log"
        done' killadd "$TRAJPACK" "$archive" "$traj" "$log" $next 2> "$TEST_TMP/add.err" &
    group=$!
    reap_kill "$group" "$archive" "$skip" "$delay" "$archive" "trial $trial"
    status=$reaped
    case $status in
    0) ;;
    137) killed=$((killed + 1)) ;;
    *) fail "trial $trial: an add failed without being killed: $(cat "$TEST_TMP/add.err")" ;;
    esac
    if [ "$skip" -ge 0 ]; then
        what="trial $trial (killed at write $((skip + 1)) of the archive)"
    else
        what="trial $trial (killed after ${delay} s)"
    fi
    check_archive "$archive" "$log" "$traj" "" "$what"
    grep -q 'after the last commit are ignored' "$TEST_TMP/verify" && torn=$((torn + 1))
done < "$TEST_TMP/delays"
[ "$trial" -eq "$TRIALS" ] || fail "ran $trial trials, not $TRIALS"
# The kill moments come from timing the first adds, so under a changing
# load fewer of them land inside an add; the bound only catches moments
# that miss the adds altogether.
[ "$killed" -ge $((TRIALS / 10)) ] || fail "only $killed of $TRIALS kills hit a running add"
[ "$TRIALS" -lt 50 ] || [ "$torn" -ge 1 ] ||
    fail "no kill left a torn commit behind: the moments are too coarse"
echo "killadd: $TRIALS kills ($aimed_kills timed by the archive's writes; $killed during adds, $torn left a torn commit; an add takes $((per_add / 1000000)) ms), $archives archives, $bytes_checked bytes compared"

# ---- 2. ENOSPC on a tiny tmpfs ---------------------------------------------------

# fill ARCHIVE LOG: adds the checkpoints in order until one fails; that
# one's message is in $TEST_TMP/add.err. Fails when all fit.
fill() {
    while IFS= read -r _f; do
        add_one "$1" "$_f" "$2" || return 0
    done < "$TEST_TMP/files"
    fail "$1: every checkpoint fitted"
}

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: killadd: not root: the ENOSPC and device-error parts"
    exit 0
fi
small=$TEST_TMP/small
mkdir "$small"
if ! mount -t tmpfs -o size=256k tmpfs "$small" 2> "$TEST_TMP/err"; then
    echo "SKIP: killadd: cannot mount a tmpfs ($(cat "$TEST_TMP/err")): the ENOSPC and device-error parts"
    exit 0
fi
SMALL_MOUNT=$small
new_archive "$small/a.traj" "$TEST_TMP/small.log"
fill "$small/a.traj" "$TEST_TMP/small.log"
grep -q 'No space left on device' "$TEST_TMP/add.err" ||
    fail "ENOSPC: the failed add says: $(cat "$TEST_TMP/add.err")"
[ "$(wc -l < "$TEST_TMP/small.log")" -ge 3 ] || fail "ENOSPC: too few adds before the disk filled"
check_archive "$small/a.traj" "$TEST_TMP/small.log" "$traj" "" "after ENOSPC"
grep -q "after the last commit" "$TEST_TMP/verify" &&
    fail "ENOSPC: the failed commit's bytes were left behind: $(cat "$TEST_TMP/verify")"
# Space freed (the tmpfs grown: the failed add may have left less than a
# page), the archive takes the next add.
mount -o remount,size=512k "$small" || fail "cannot grow the tmpfs"
"$TRAJPACK" add -q --as after-enospc.json "$small/a.traj" "$traj/config.json" ||
    fail "ENOSPC: an add once space was freed failed"
echo "killadd: ENOSPC after $(wc -l < "$TEST_TMP/small.log") files: $(cat "$TEST_TMP/add.err")"

# ---- 3. a device that fails writes back ------------------------------------------

for attempt in 1 2 3 4; do
    [ "$attempt" -lt 4 ] || fail "device error: the filesystem lost the archive file on 3 disks"
    failing_disk 640k 16M || exit 0
    disk=$DISK_MOUNT
    new_archive "$disk/a.traj" "$TEST_TMP/disk.log"
    fill "$disk/a.traj" "$TEST_TMP/disk.log"
    grep -qE 'fsync.*(Input/output error|No space left on device)' "$TEST_TMP/add.err" ||
        fail "device error: the failed add says: $(cat "$TEST_TMP/add.err")"
    [ "$(wc -l < "$TEST_TMP/disk.log")" -ge 3 ] || fail "device error: too few adds before it"
    remount_disk
    disk_kept "$disk/a.traj" && break
    drop_disk
done
check_archive "$disk/a.traj" "$TEST_TMP/disk.log" "$traj" "" "after the device error, remounted"
echo "killadd: device write error after $(wc -l < "$TEST_TMP/disk.log") files: $(cat "$TEST_TMP/add.err")"
echo "killadd: $bytes_checked bytes compared with their sources"
exit 0
