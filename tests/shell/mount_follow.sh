#!/bin/sh
# Following a growing archive (-o follow, on by default): while a
# read-only mount stands, commits that `trajpack add` or a read-write
# mount elsewhere append to its archive show (how soon is printed)
# (new checkpoints in ls, though the kernel had the names as absent and
# the listings cached; a replaced file's new content, also where the
# rw mount kept its inode and the kernel had its pages cached; removed
# files gone), while descriptors opened before keep reading the versions
# they opened. A tail without a valid trailer (bytes appended by hand; a
# commit written up to its last bytes) changes nothing and the mount
# goes on serving, until the trailer is whole. follow=0 shows none of
# it; rw refuses follow.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

FOLLOW=1 # seconds: the default
export TRAJFS_FOLLOW_TRACE=1 # followed

src=$TEST_TMP/src
generate_tiny_trajectory "$src/run"
printf 'notes v1\n' > "$src/notes.txt"
printf 'gone soon\n' > "$src/gone.txt"
printf 'over v1\n' > "$src/over.txt"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run/config.json" "$src/notes.txt" "$src/gone.txt" \
    "$src/over.txt" || fail "create failed"
"$TRAJPACK" add -q --as bf16/step-000002.safetensors "$archive" \
    "$src/run/bf16/step-000002.safetensors" || fail "add failed"

mnt=$TEST_TMP/mnt
off=$TEST_TMP/off
start_mount "$archive" "$off" -o follow=0
off_pid=$DAEMON_PID
start_mount "$archive" "$mnt"
follow_pid=$DAEMON_PID

# What the kernel keeps of both mounts: listings, the names to come as
# absent, attributes, the pages of over.txt.
for m in "$mnt" "$off"; do
    ls -lR "$m" > /dev/null
    [ ! -e "$m/bf16/step-000004.safetensors" ] || fail "$m shows a checkpoint not added yet"
    [ ! -e "$m/newdir" ] || fail "$m shows a directory not made yet"
    [ "$(cat "$m/over.txt")" = "over v1" ] || fail "over.txt reads $(cat "$m/over.txt")"
done
# Descriptors of versions about to be replaced and removed; one of
# over.txt keeps its inode, and the pages of it, in the kernel.
exec 3< "$mnt/notes.txt"
exec 4< "$mnt/gone.txt"
exec 5< "$mnt/over.txt"


listed() { # listed DIR NAME
    ls "$1" | grep -qx "$2"
}

# ---- trajpack add: a new checkpoint, a new version of a file ----
"$TRAJPACK" add -q --as bf16/step-000004.safetensors "$archive" \
    "$src/run/bf16/step-000004.safetensors" || fail "add failed"
ms=$(wait_for "a checkpoint added" test -e "$mnt/bf16/step-000004.safetensors")
echo "a checkpoint added by trajpack add was seen after $ms ms (follow=$FOLLOW)"
cmp "$mnt/bf16/step-000004.safetensors" "$src/run/bf16/step-000004.safetensors" ||
    fail "the added checkpoint differs"
[ "$(ls "$mnt/bf16" | tr '\n' ' ')" = "step-000002.safetensors step-000004.safetensors " ] ||
    fail "ls bf16 shows $(ls "$mnt/bf16")"
# The root's modification time, and the change time of the directory
# that changed (NFS looks at it), are the commit's.
[ "$(stat -c %y "$mnt")" = "$(stat -c %y "$archive")" ] ||
    fail "the root's mtime is $(stat -c %y "$mnt"), the archive's $(stat -c %y "$archive")"
[ "$(stat -c %z "$mnt/bf16")" = "$(stat -c %y "$archive")" ] ||
    fail "the ctime of bf16 is $(stat -c %z "$mnt/bf16"), the archive's mtime $(stat -c %y "$archive")"

printf 'notes v2, longer\n' > "$TEST_TMP/notes2"
"$TRAJPACK" add -q --as notes.txt "$archive" "$TEST_TMP/notes2" || fail "add failed"
ms=$(wait_for "a replaced file" reads "$mnt/notes.txt" "notes v2, longer")
echo "a file replaced by trajpack add was seen after $ms ms"
[ "$(stat -c %s "$mnt/notes.txt")" = 17 ] || fail "notes.txt has $(stat -c %s "$mnt/notes.txt") bytes"
[ "$(cat <&3)" = "notes v1" ] || fail "a descriptor opened before the replacement reads other bytes"

# ---- a read-write mount elsewhere: remove, overwrite in place, mkdir ----
rw=$TEST_TMP/rw
start_mount "$archive" "$rw" -o rw
rm "$rw/gone.txt"
ino=$(stat -c %i "$rw/over.txt")
printf 'over v2\n' > "$rw/over.txt" # as long: the kernel keeps its pages unless told
mkdir "$rw/newdir"
cp "$src/run/fp32/step-000002.safetensors" "$rw/newdir/"
stop_mount "$rw"
[ "$(stat -c %i "$mnt/over.txt")" = "$ino" ] || fail "over.txt has another inode number"
wait_for "a removed file" test ! -e "$mnt/gone.txt" > /dev/null
[ "$(cat <&4)" = "gone soon" ] || fail "a descriptor of a removed file reads other bytes"
wait_for "a file overwritten in place" reads "$mnt/over.txt" "over v2" > /dev/null
wait_for "a new directory" test -e "$mnt/newdir/step-000002.safetensors" > /dev/null
cmp "$mnt/newdir/step-000002.safetensors" "$src/run/fp32/step-000002.safetensors" ||
    fail "the checkpoint copied into the rw mount differs"
exec 3<&- 4<&- 5<&-

# ---- torn tails ----
# Bytes appended by hand, the trailer's magic among them: nothing changes.
size=$(file_size "$archive")
{ head -c 3000 /dev/urandom; printf '\211TRJEND\n'; head -c 56 /dev/urandom; } >> "$archive"
followed "$mnt.log"
kill -0 "$follow_pid" 2> /dev/null || fail "the daemon exited after a torn tail"
cmp "$mnt/bf16/step-000004.safetensors" "$src/run/bf16/step-000004.safetensors" ||
    fail "the mount does not read right after a torn tail"
# The next add cuts the torn tail off and commits. (A name never looked
# up: only the listing the kernel has cached must go.)
"$TRAJPACK" add -q --as bf16/step-000006.safetensors "$archive" \
    "$src/run/bf16/step-000006.safetensors" || fail "add after a torn tail failed"
[ "$(file_size "$archive")" -gt "$size" ] || fail "the add did not append"
wait_for "a commit after a torn tail" listed "$mnt/bf16" step-000006.safetensors > /dev/null

# A commit appended up to its last 10 bytes (made on a copy: what a
# writer would append here), then the rest.
torn_commit "$archive" fp32/step-000004.safetensors "$src/run/fp32/step-000004.safetensors"
followed "$mnt.log"
[ ! -e "$mnt/fp32/step-000004.safetensors" ] || fail "a commit without its trailer shows"
cmp "$mnt/notes.txt" "$TEST_TMP/notes2" || fail "the mount does not read right with a commit half there"
finish_commit "$archive"
wait_for "a commit whose trailer came last" test -e "$mnt/fp32/step-000004.safetensors" > /dev/null
cmp "$mnt/fp32/step-000004.safetensors" "$src/run/fp32/step-000004.safetensors" ||
    fail "the checkpoint of the completed commit differs"

# ---- follow=0 saw none of it ----
for p in bf16/step-000004.safetensors bf16/step-000006.safetensors newdir; do
    [ ! -e "$off/$p" ] || fail "the mount with follow=0 shows $p"
done
[ -e "$off/gone.txt" ] || fail "the mount with follow=0 lost gone.txt"
reads "$off/over.txt" "over v1" || fail "the mount with follow=0 reads a new over.txt"
reads "$off/notes.txt" "notes v1" || fail "the mount with follow=0 reads a new notes.txt"

# A remount shows what the following mount shows.
start_mount "$archive" "$TEST_TMP/again" -o follow=0
list_files "$mnt" > "$TEST_TMP/followed"
list_files "$TEST_TMP/again" > "$TEST_TMP/remounted"
cmp "$TEST_TMP/followed" "$TEST_TMP/remounted" ||
    { diff "$TEST_TMP/followed" "$TEST_TMP/remounted" >&2; fail "the following mount and a remount differ"; }
stop_mount "$TEST_TMP/again"

DAEMON_PID=$off_pid
stop_mount "$off"
DAEMON_PID=$follow_pid
stop_mount "$mnt"
for log in "$mnt.log" "$off.log" "$rw.log" "$TEST_TMP/again.log"; do
    ! grep -Ei 'error|not applied|replaced|sanitizer' "$log" || fail "the daemon said so in $log"
done

# ---- options ----
mkdir -p "$TEST_TMP/never"
for opts in rw,follow=1 follow=-1 follow=soon; do
    if timeout 10 "$TRAJFS" "$archive" "$TEST_TMP/never" -f -o "$opts" 2> "$TEST_TMP/err"; then
        fail "trajfs -o $opts mounted"
    fi
    grep -q "follow=" "$TEST_TMP/err" || fail "trajfs -o $opts said: $(cat "$TEST_TMP/err")"
    ! is_mounted "$TEST_TMP/never" || fail "trajfs -o $opts left a mount"
done
exit 0
