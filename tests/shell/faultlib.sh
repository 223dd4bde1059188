# Sourced by the crash and fault-injection tests (after lib.sh): checking
# an archive after a crash, and a small or failing disk to put it on.

bytes_checked=0

# Every KILL_AIM-th kill of the crash tests is timed by the archive's
# writes (tests/tools/killonwrite) rather than by the clock, which rarely
# falls inside a commit's writes. kill_skip TRIAL prints how many writes
# of the archive trial TRIAL lets pass before its kill (0 to 7), or -1
# for a kill timed by the clock.
KILL_AIM=5
KILLONWRITE=$top_builddir/tests/tools/killonwrite
kill_skip() {
    if [ $(($1 % KILL_AIM)) -eq 0 ]; then
        echo $(($1 / KILL_AIM % 8))
    else
        echo -1
    fi
}

# reap_kill GROUP WATCHED SKIP DELAY ARCHIVE WHAT: kills the process group
# GROUP (started with setsid) at write SKIP + 1 of WATCHED, a file or a
# directory (killonwrite), when SKIP >= 0, else after DELAY seconds;
# waits for it, then for ARCHIVE's writer lock. Sets reaped to the
# group leader's exit status (137: killed), and counts a kill timed by
# the writes in aimed_kills.
aimed_kills=0
reap_kill() {
    if [ "$3" -ge 0 ]; then
        # The watch starts while the process reads its input; a write
        # before it only moves the kill to a later one.
        _rc=0
        "$KILLONWRITE" "$2" "-$1" "$3" 5000 > /dev/null || _rc=$?
        [ "$_rc" -le 1 ] || fail "$6: killonwrite failed"
        [ "$_rc" -ne 0 ] || aimed_kills=$((aimed_kills + 1))
    else
        sleep "$4"
        kill -9 "-$1" 2> /dev/null || true # dash: no "kill -s KILL --"
    fi
    reaped=0
    wait "$1" 2> /dev/null || reaped=$? # (dash reports "Killed")
    # wait reaps only the leader; a writer may still be exiting, holding
    # the writer's lock. Its main thread showing as a zombie is not
    # enough: a process's files close as the last of its threads exits,
    # and encoder threads may outlive the main thread by a moment. The
    # next trial needs the lock, so wait for the lock itself.
    flock -w 10 "$5" true || fail "$6: the archive's lock is still held 10 s after the kill"
}

# Mounts and loop devices set up here, undone by fault_cleanup in this
# order.
DISK_MOUNT="" LOOP="" BACK_MOUNT="" SMALL_MOUNT=""
fault_cleanup() {
    for _m in "$DISK_MOUNT" "$LOOP" "$BACK_MOUNT" "$SMALL_MOUNT"; do
        case $_m in
        "") ;;
        /dev/*) losetup -d "$_m" 2> /dev/null || true ;;
        *) umount "$_m" 2> /dev/null || umount -l "$_m" 2> /dev/null || true ;;
        esac
    done
}

# check_archive ARCHIVE LOG SOURCES PREFIX WHAT: the archive opens and
# verifies, lists every path of LOG, lists nothing outside PREFIX (a
# folder with its slash, or empty), and every file it lists is
# byte-identical to its source: archive path PREFIX/P is SOURCES/P (only
# files not added yet may be missing). Adds the bytes compared to
# bytes_checked. A few processes per call: it runs after every kill.
check_archive() {
    _a=$1 _log=$2 _src=$3 _prefix=$4 _what=$5
    "$TRAJPACK" list "$_a" > "$TEST_TMP/list" 2> "$TEST_TMP/err" ||
        fail "$_what: the archive does not open: $(cat "$TEST_TMP/err")"
    "$TRAJPACK" verify -q "$_a" > "$TEST_TMP/verify" 2> "$TEST_TMP/err" ||
        fail "$_what: verify failed: $(cat "$TEST_TMP/err") $(cat "$TEST_TMP/verify")"
    if grep -vxFf "$TEST_TMP/list" "$_log" > "$TEST_TMP/missing"; then
        fail "$_what: reported done but not listed: $(cat "$TEST_TMP/missing")"
    fi
    if [ -n "$_prefix" ] && grep -v "^$_prefix" "$TEST_TMP/list" > "$TEST_TMP/other"; then
        fail "$_what: the archive lists other files: $(head -n 3 "$TEST_TMP/other")"
    fi
    rm -rf "$TEST_TMP/out"
    mkdir "$TEST_TMP/out"
    "$TRAJPACK" extract -q "$_a" -C "$TEST_TMP/out" 2> "$TEST_TMP/err" ||
        fail "$_what: extract failed: $(cat "$TEST_TMP/err")"
    diff -rq "$TEST_TMP/out/$_prefix" "$_src" > "$TEST_TMP/diff" 2>&1 || true
    if grep -vF "Only in $_src" "$TEST_TMP/diff" > "$TEST_TMP/diff.bad"; then
        fail "$_what: not whole: $(head -n 3 "$TEST_TMP/diff.bad")"
    fi
    bytes_checked=$((bytes_checked + $(find "$TEST_TMP/out" -type f -printf '%s\n' |
        awk '{ s += $1 } END { print s + 0 }')))
}

# failing_disk TMPFS_SIZE IMAGE_SIZE: ext4 on a loop device whose
# backing file (IMAGE_SIZE, sparse) lies on a tmpfs of TMPFS_SIZE, so
# that once the tmpfs is full, write() still succeeds into the page
# cache and the writeback fails (fsync reports it). Mounted at
# $TEST_TMP/disk; returns 1, with a SKIP line, where the machine cannot
# (not root, no losetup, mkfs.ext4 or loop device).
failing_disk() {
    _back=$TEST_TMP/back
    mkdir -p "$_back" "$TEST_TMP/disk"
    if ! command -v losetup > /dev/null || ! command -v mkfs.ext4 > /dev/null ||
        ! mount -t tmpfs -o size="$1" tmpfs "$_back" 2> /dev/null; then
        echo "SKIP: $TEST_NAME: no losetup, mkfs.ext4 or tmpfs: the device error part"
        return 1
    fi
    BACK_MOUNT=$_back
    truncate -s "$2" "$_back/disk.img"
    if ! LOOP=$(losetup -f --show "$_back/disk.img" 2> "$TEST_TMP/err"); then
        LOOP=""
        echo "SKIP: $TEST_NAME: no loop device ($(cat "$TEST_TMP/err")): the device error part"
        return 1
    fi
    # Inode tables written now (no lazy init filling the backing file later).
    mkfs.ext4 -q -O ^has_journal -N 32 -E lazy_itable_init=0,nodiscard "$LOOP" ||
        fail "mkfs.ext4 $LOOP failed"
    # dioread_lock: writeback writes blocks in place, not as unwritten
    # extents converted once written: a failed conversion splits the file's
    # extents and, beyond the inode's four, needs a new extent block whose
    # own write then fails too (see disk_kept; 1 run in 2 under load).
    mount -o dioread_lock "$LOOP" "$TEST_TMP/disk" || fail "mount $LOOP failed"
    DISK_MOUNT=$TEST_TMP/disk
}

# remount_disk: what is on the device, not in the page cache.
remount_disk() {
    umount "$DISK_MOUNT" || fail "umount $DISK_MOUNT failed"
    mount -o ro "$LOOP" "$DISK_MOUNT" || fail "remount of $LOOP failed"
}

# disk_kept FILE: whether FILE, remounted, reads back at all. ext4
# without a journal writes an inode and the extent block it comes to need
# in no order: when the device fails the block's write and not the
# inode's, the file is unreadable (EIO; the kernel logs "bad
# header/extent"), its earlier, synced bytes included, whatever wrote it.
# Such a run says nothing of the archive; the test takes a new disk.
disk_kept() {
    cat "$1" > /dev/null 2>&1 && return 0
    echo "$TEST_NAME: the filesystem on the failing device lost $1's extent block (it does not read back); a new disk"
    return 1
}

# drop_disk: undoes failing_disk.
drop_disk() {
    umount "$DISK_MOUNT" 2> /dev/null || umount -l "$DISK_MOUNT"
    losetup -d "$LOOP"
    umount "$BACK_MOUNT" 2> /dev/null || umount -l "$BACK_MOUNT"
    DISK_MOUNT="" LOOP="" BACK_MOUNT=""
    rm -rf "$TEST_TMP/back" "$TEST_TMP/disk"
}
