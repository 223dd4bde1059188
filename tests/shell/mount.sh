#!/bin/sh
# The mount: every file of a trajectory, of hand-made checkpoints and of a
# tree of other files equals its original (bytes, mode, mtime, symlink
# target); writes fail; inode numbers stay the same across remounts and
# file handles stay valid after drop_caches and a remount; reading
# everything in step order decodes each blob at most once; SIGTERM,
# SIGINT and fusermount3 -u unmount cleanly; the command line and the
# mount.trajfs convention of mount(8) (and an fstab line); a truncated
# archive mounts at its last good commit.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

src=$TEST_TMP/src
mkdir -p "$src"
generate_run "$src/run"
cp -pR "$top_srcdir/examples/tiny-run" "$src/tiny-run"
make_safetensors good "$src/handmade"
misc=$src/misc
mkdir -p "$misc/a/b/c" "$misc/empty dir"
printf 'plain text\n' > "$misc/notes.txt"
: > "$misc/empty"
seq 1 200000 > "$misc/a/b/numbers.txt"
head -c 3000000 /dev/urandom > "$misc/a/b/c/random.bin"
cp "$src/run/step-000010.safetensors" "$misc/a/copy.safetensors"
ln -s ../run/config.json "$misc/link"
chmod 0600 "$misc/notes.txt"
chmod 0750 "$misc/a"

archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run" "$src/tiny-run" "$src/handmade" "$misc" ||
    fail "create failed"
mnt=$TEST_TMP/mnt

# ---- contents, attributes, read-only ----
start_mount "$archive" "$mnt"
for d in run tiny-run handmade misc; do
    assert_same_tree "$src/$d" "$mnt/$d"
done
[ "$(cd "$mnt" && LC_ALL=C ls)" = "$(printf 'handmade\nmisc\nrun\ntiny-run')" ] ||
    fail "the mount's root lists $(ls "$mnt")"
[ "$(stat -c %i "$mnt")" = 1 ] || fail "the root is not inode 1"
[ "$(stat -f -c %l "$mnt")" = 255 ] || fail "statfs: name length $(stat -f -c %l "$mnt")"
awk -v d="$mnt" '$5 == d' /proc/self/mountinfo | grep -q ' fuse\.trajfs .* ro' ||
    fail "not a read-only fuse.trajfs mount: $(grep "$mnt" /proc/self/mountinfo)"
if touch "$mnt/run/new" 2> /dev/null; then fail "created a file in the mount"; fi
err=$(sh -c ": > '$mnt/misc/notes.txt'" 2>&1) && fail "truncated a file in the mount"
echo "$err" | grep -q 'Read-only file system' || fail "writing said: $err"
if mkdir "$mnt/misc/newdir" 2> /dev/null; then fail "created a directory in the mount"; fi

# ---- the kernel's read-ahead window, set through sysfs (root only) ----
read_ahead_kb() {
    cat "/sys/class/bdi/$(mountpoint -d "$1")/read_ahead_kb"
}
if [ "$(id -u)" = 0 ]; then
    [ "$(read_ahead_kb "$mnt")" = 4096 ] ||
        fail "a read-ahead window of $(read_ahead_kb "$mnt") KiB, not the default 4096"
    # a mount point that /proc/self/mountinfo writes escaped
    spaced="$TEST_TMP/mnt two" first=$DAEMON_PID
    start_mount "$archive" "$spaced" -o readahead=8M
    cmp "$src/run/config.json" "$spaced/run/config.json" || fail "the second mount reads other bytes"
    [ "$(read_ahead_kb "$spaced")" = 8192 ] ||
        fail "-o readahead=8M: a window of $(read_ahead_kb "$spaced") KiB"
    stop_mount "$spaced"
    DAEMON_PID=$first
fi

# ---- stable inode numbers and file handles ----
inode_list() {
    (cd "$mnt" && find . -printf '%i %p\n' | LC_ALL=C sort -k 2)
}
inode_list > "$TEST_TMP/inodes.1"
if [ "$(id -u)" = 0 ]; then
    "$TOOLS/fhandle" save "$mnt/run/step-000020.safetensors" "$TEST_TMP/h.file" ||
        fail "name_to_handle_at failed (no export support?)"
    "$TOOLS/fhandle" save "$mnt/misc/a/b" "$TEST_TMP/h.dir" || fail "name_to_handle_at failed"
    # The kernel forgets the inodes; the handles must find them again
    # (lookup of "." for the file, of ".." to reconnect the directory).
    echo 2 > /proc/sys/vm/drop_caches
    "$TOOLS/fhandle" cat "$mnt" "$TEST_TMP/h.file" > "$TEST_TMP/via-handle" ||
        fail "file handle stale after drop_caches"
    cmp "$TEST_TMP/via-handle" "$src/run/step-000020.safetensors" ||
        fail "file handle reads other bytes after drop_caches"
    [ "$("$TOOLS/fhandle" ino "$mnt" "$TEST_TMP/h.dir")" = "$(stat -c %i "$mnt/misc/a/b")" ] ||
        fail "directory handle stale after drop_caches"
else
    echo "$TEST_NAME: not root: file handle checks skipped (they need CAP_DAC_READ_SEARCH)"
fi
stop_mount "$mnt"

# A fresh mount with a cache that holds a checkpoint and its reference.
start_mount "$archive" "$mnt" -o cache_size=256M
inode_list > "$TEST_TMP/inodes.2"
cmp -s "$TEST_TMP/inodes.1" "$TEST_TMP/inodes.2" ||
    { diff "$TEST_TMP/inodes.1" "$TEST_TMP/inodes.2" >&2; fail "inode numbers changed on remount"; }
if [ "$(id -u)" = 0 ]; then
    "$TOOLS/fhandle" cat "$mnt" "$TEST_TMP/h.file" | cmp - "$src/run/step-000020.safetensors" ||
        fail "file handle stale after a remount"
    [ "$("$TOOLS/fhandle" ino "$mnt" "$TEST_TMP/h.dir")" = "$(stat -c %i "$mnt/misc/a/b")" ] ||
        fail "directory handle stale after a remount"
fi

# ---- each blob decoded at most twice, and once read, kept ----
# The steps of a chain below the blob read are decoded but not kept the
# first time (a cold load of one checkpoint keeps none); a step decoded
# again is kept. So reading everything, the newest first, decodes a blob
# at most once as a file's chunk and once as such a step; a second pass
# with a cache that holds all of it decodes nothing more.
read_all_newest_first() {
    list_files "$src" | LC_ALL=C sort -r | while IFS= read -r p; do cat "$mnt/$p"; done > /dev/null
}
stop_mount "$mnt"
start_mount "$archive" "$mnt" -o cache_size=256M
read_all_newest_first
stop_mount "$mnt"
once=$(decoded_blobs "$mnt")
start_mount "$archive" "$mnt" -o cache_size=256M
read_all_newest_first
read_all_newest_first
stop_mount "$mnt"
twice=$(decoded_blobs "$mnt")
blobs=$(archive_blobs "$archive")
[ -n "$once" ] && [ "$once" -gt 0 ] || fail "no decode count in $(cat "$mnt.log")"
[ "$once" -le $((2 * blobs)) ] || fail "$once blobs decoded for an archive of $blobs"
[ "$twice" = "$once" ] || fail "a second read of everything decoded $((twice - once)) blobs again"

# ---- signals unmount ----
for sig in TERM INT; do
    start_mount "$archive" "$mnt"
    kill -s "$sig" "$DAEMON_PID"
    wait_daemon "$DAEMON_PID" || fail "trajfs exited with status $? on SIG$sig"
    ! is_mounted "$mnt" || fail "still mounted after SIG$sig"
done

# ---- command line ----
"$TRAJFS" --help | grep -q 'cache_size=SIZE' || fail "--help does not show cache_size"
"$TRAJFS" --version | grep -q '^trajfs [0-9]' || fail "--version does not show the version"
if "$TRAJFS" 2> /dev/null; then fail "ran without arguments"; fi
if "$TRAJFS" "$archive" 2> /dev/null; then fail "ran without a mount point"; fi
if "$TRAJFS" "$archive" "$mnt" -o cache_size=lots 2> "$TEST_TMP/err"; then fail "cache_size=lots accepted"; fi
grep -q 'cache_size=lots' "$TEST_TMP/err" || fail "cache_size error: $(cat "$TEST_TMP/err")"
if "$TRAJFS" "$TEST_TMP/none.traj" "$mnt" 2> "$TEST_TMP/err"; then fail "mounted a missing archive"; fi
grep -q 'none.traj' "$TEST_TMP/err" || fail "missing archive: $(cat "$TEST_TMP/err")"
head -c 5000 /dev/urandom > "$TEST_TMP/garbage.traj"
if "$TRAJFS" "$TEST_TMP/garbage.traj" "$mnt" 2> "$TEST_TMP/err"; then fail "mounted garbage"; fi
grep -q 'garbage.traj' "$TEST_TMP/err" || fail "garbage archive: $(cat "$TEST_TMP/err")"
! is_mounted "$mnt" || fail "a failed mount left a mount behind"

# ---- mount.trajfs: mount(8)'s argument convention, as a daemon ----
helper=$TEST_TMP/mount.trajfs
ln -s "$TRAJFS" "$helper"
"$helper" -f "$archive" "$mnt" -o ro || fail "mount.trajfs -f (fake) failed"
! is_mounted "$mnt" || fail "mount.trajfs -f mounted"
"$helper" "$archive" "$mnt" -o ro,noauto,nofail,_netdev,x-systemd.device-timeout=5,allow_other ||
    fail "mount.trajfs failed"
is_mounted "$mnt" || fail "mount.trajfs did not mount"
DAEMONS="$DAEMONS $(pgrep -f -- "$helper $archive" || true)"
awk -v d="$mnt" '$5 == d' /proc/self/mountinfo | grep -q 'allow_other' ||
    fail "allow_other did not reach the mount"
cmp "$src/run/step-000005.optim.safetensors" "$mnt/run/step-000005.optim.safetensors" ||
    fail "mount.trajfs mount reads other bytes"
fusermount3 -u "$mnt" || fail "fusermount3 -u failed"
wait_gone "$helper $archive"

# An fstab line, through mount(8) itself: in a private mount namespace,
# /sbin (where mount(8) looks for helpers) shows only our mount.trajfs.
# The umount comes right after the read: nothing of the daemon's may hold
# the mount then.
if unshare -m true 2> /dev/null; then
    mkdir "$TEST_TMP/sbin"
    ln -s "$TRAJFS" "$TEST_TMP/sbin/mount.trajfs"
    printf '%s %s trajfs ro,allow_other 0 0\n' "$archive" "$mnt" > "$TEST_TMP/fstab"
    unshare -m sh -c '
        mount --make-rprivate / && mount --bind "$1/sbin" "$(readlink -f /sbin)" &&
        mount -T "$1/fstab" "$2" && cmp "$3" "$2/run/config.json" && umount "$2"' \
        sh "$TEST_TMP" "$mnt" "$src/run/config.json" || fail "mount(8) with an fstab line failed"
    wait_gone "mount.trajfs $archive"
else
    echo "$TEST_NAME: unshare -m not permitted: the fstab check through mount(8) skipped"
fi

# ---- a torn last commit: the mount shows the commit before ----
cut=$TEST_TMP/cut.traj
cp "$archive" "$cut"
truncate -s $(($(file_size "$archive") - 100)) "$cut"
"$TRAJPACK" list "$cut" | LC_ALL=C sort > "$TEST_TMP/cut.list" || fail "list of the cut archive failed"
"$TRAJPACK" list "$archive" | LC_ALL=C sort > "$TEST_TMP/full.list"
[ "$(wc -l < "$TEST_TMP/cut.list")" -lt "$(wc -l < "$TEST_TMP/full.list")" ] ||
    fail "cutting the last trailer kept every entry"
start_mount "$cut" "$mnt"
(cd "$mnt" && find . -mindepth 1 \( -type d -printf '%P/\n' -o -printf '%P\n' \)) |
    LC_ALL=C sort > "$TEST_TMP/cut.mounted"
cmp -s "$TEST_TMP/cut.list" "$TEST_TMP/cut.mounted" ||
    { diff "$TEST_TMP/cut.list" "$TEST_TMP/cut.mounted" >&2; fail "the cut archive mounts other entries"; }
grep -v '/$' "$TEST_TMP/cut.list" | while IFS= read -r p; do
    cmp "$src/$p" "$mnt/$p" || fail "$p differs in the cut archive"
done
stop_mount "$mnt"
exit 0
