#!/bin/sh
# The writable mount's tree: mkdir, mv of a file just written and of a
# directory, rm (a tombstone), rmdir, symbolic links, chmod and touch,
# and the errors of each; a file being written is invisible by name until
# its close commits it, and stays removed when removed while it is
# rewritten; two writers of one
# path both complete and the last close wins; writers of different files
# run side by side; inode numbers survive renames and remounts. Then
# `trajpack gc`: a smaller archive with the same files and inode numbers,
# and no inode number given twice afterwards; the same of `trajpack
# repack`.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt
plain=$TEST_TMP/plain
mkdir "$plain"
"$PYTHON" "$WRITE_CHECKPOINTS" "$plain" 1 4 || fail "write_checkpoints.py failed"

# errno_of COMMAND...: the strerror text of a failing command (its last
# line, after the last ": ").
errno_of() {
    if "$@" 2> "$TEST_TMP/err"; then fail "$* succeeded"; fi
    tail -1 "$TEST_TMP/err" | sed 's/.*: //'
}

start_mount "$archive" "$mnt" -o rw

# ---- directories, renames, links, attributes ----
mkdir -p "$mnt/a/b" || fail "mkdir -p failed"
printf 'one\n' > "$mnt/a/f1"
ino=$(stat -c %i "$mnt/a/f1")
mv "$mnt/a/f1" "$mnt/a/b/f2" || fail "mv of a file just written failed"
[ ! -e "$mnt/a/f1" ] || fail "the old name is still there after mv"
[ "$(cat "$mnt/a/b/f2")" = one ] || fail "the moved file reads $(cat "$mnt/a/b/f2")"
[ "$(stat -c %i "$mnt/a/b/f2")" = "$ino" ] || fail "mv changed the inode number"
mv "$mnt/a/b" "$mnt/c" || fail "mv of a directory failed"
[ "$(cat "$mnt/c/f2")" = one ] && [ "$(stat -c %i "$mnt/c/f2")" = "$ino" ] ||
    fail "the file did not move with its directory"
ln -s c/f2 "$mnt/link" || fail "ln -s failed"
[ "$(readlink "$mnt/link")" = c/f2 ] && [ "$(cat "$mnt/link")" = one ] || fail "the symlink is wrong"
chmod 0604 "$mnt/c/f2" || fail "chmod failed"
touch -d @1600000000.5 "$mnt/c/f2" || fail "touch failed"
[ "$(stat -c '%a %Y' "$mnt/c/f2")" = "604 1600000000" ] || fail "chmod/touch: $(stat -c '%a %Y' "$mnt/c/f2")"
[ "$(errno_of mkdir "$mnt/c")" = "File exists" ] || fail "mkdir of an existing name"
[ "$(errno_of rmdir "$mnt/c")" = "Directory not empty" ] || fail "rmdir of a full directory"
[ "$(errno_of ln "$mnt/c/f2" "$mnt/hard")" = "Operation not permitted" ] || fail "hard link"
rm "$mnt/link" && rmdir "$mnt/a" || fail "rm or rmdir failed"
[ ! -e "$mnt/link" ] && [ ! -e "$mnt/a" ] || fail "rm or rmdir left the name"

# ---- files being written ----
"$PYTHON" - "$mnt" <<'PY' || fail "file semantics (above) are wrong"
import os, sys
mnt = sys.argv[1]
p = os.path.join(mnt, "pending")
f = open(p, "wb")
f.write(b"x" * 100000)
assert "pending" not in os.listdir(mnt), "a file being written is listed"
assert not os.path.exists(p), "a file being written has a name"
f.close()
assert open(p, "rb").read() == b"x" * 100000, "the closed file reads other bytes"
# Rewritten, but removed before its close: not committed again.
g = open(p, "wb")
g.write(b"y")
os.unlink(p)
g.close()
assert not os.path.exists(p), "a file removed while open came back"
# Two writers of one path: both complete, the last close wins.
w = os.path.join(mnt, "twice")
a, b = open(w, "wb"), open(w, "wb")
a.write(b"A" * 5000)
b.write(b"B" * 7000)
b.close()
a.close()
assert open(w, "rb").read() == b"A" * 5000, "the last close did not win"
PY

# Writers of different files side by side.
copiers=""
for i in 1 2 3 4; do
    cp "$plain/step-$i.safetensors" "$mnt/c/par-$i.safetensors" &
    copiers="$copiers $!"
done
for p in $copiers; do
    wait "$p" || fail "a parallel cp failed"
done
for i in 1 2 3 4; do
    cmp "$plain/step-$i.safetensors" "$mnt/c/par-$i.safetensors" || fail "parallel copy $i differs"
done

# ---- inode numbers across a remount ----
gone_ino=$(stat -c %i "$mnt/c/par-4.safetensors")
rm "$mnt/c/par-4.safetensors"
printf 'again\n' > "$mnt/pending"
inode_list "$mnt" > "$TEST_TMP/inodes.1"
stop_mount "$mnt"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list"
! grep -q 'par-4' "$TEST_TMP/list" || fail "a removed file is listed: $(cat "$TEST_TMP/list")"
start_mount "$archive" "$mnt" -o rw
inode_list "$mnt" > "$TEST_TMP/inodes.2"
cmp -s "$TEST_TMP/inodes.1" "$TEST_TMP/inodes.2" ||
    { diff "$TEST_TMP/inodes.1" "$TEST_TMP/inodes.2" >&2; fail "inode numbers changed on remount"; }
stop_mount "$mnt"

# ---- gc ----
# kept_after WHAT INODES: the mount at $mnt has the inode numbers listed
# in INODES (inode_list) and steps 1 to 3 as they were written.
kept_after() {
    inode_list "$mnt" > "$TEST_TMP/inodes.now"
    cmp -s "$2" "$TEST_TMP/inodes.now" ||
        { diff "$2" "$TEST_TMP/inodes.now" >&2; fail "$1 changed inode numbers"; }
    for i in 1 2 3; do
        cmp "$plain/step-$i.safetensors" "$mnt/c/par-$i.safetensors" || fail "step $i differs after $1"
    done
}
before=$(file_size "$archive")
if ! start_mount "$archive" "$mnt" -o rw ||
   "$TRAJPACK" gc -q "$archive" > /dev/null 2> "$TEST_TMP/err"; then
    fail "gc ran beside a rw mount"
fi
grep -q 'another writer' "$TEST_TMP/err" || fail "gc beside a rw mount said: $(cat "$TEST_TMP/err")"
stop_mount "$mnt"
"$TRAJPACK" gc --rewrite "$archive" > "$TEST_TMP/gc.out" || fail "gc failed"
grep -q '^gc: rewritten, .* -> .*, [1-9][0-9]* of [0-9]* blobs dropped$' "$TEST_TMP/gc.out" ||
    fail "gc said: $(cat "$TEST_TMP/gc.out")"
[ "$(file_size "$archive")" -lt "$before" ] || fail "gc did not make the archive smaller"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after gc failed"
"$TRAJPACK" list "$archive" | cmp -s - "$TEST_TMP/list" || fail "gc changed the listing"
ls "$TEST_TMP"/a.traj.* 2> /dev/null && fail "gc left a temporary file"
"$TRAJPACK" gc --rewrite "$archive" | grep -q '^gc: nothing to rewrite' ||
    fail "a second gc found work"
start_mount "$archive" "$mnt" -o rw
kept_after gc "$TEST_TMP/inodes.1"
: > "$mnt/new"
new_ino=$(stat -c %i "$mnt/new")
[ "$new_ino" -gt "$gone_ino" ] || fail "inode $new_ino after gc: numbers up to $gone_ino were given before"

# ---- repack ----
# The newest inode number removed, so that no live entry carries the
# counter; refused beside a rw mount; then every file re-encoded keeps
# its inode number, and no number given before is given again.
rm "$mnt/new"
inode_list "$mnt" > "$TEST_TMP/inodes.4"
if "$TRAJPACK" repack -q "$archive" > /dev/null 2> "$TEST_TMP/err"; then
    fail "repack ran beside a rw mount"
fi
grep -q 'another writer' "$TEST_TMP/err" || fail "repack beside a rw mount said: $(cat "$TEST_TMP/err")"
stop_mount "$mnt"
"$TRAJPACK" repack -q --max-chain 1 "$archive" > /dev/null 2> "$TEST_TMP/err" ||
    fail "repack failed: $(cat "$TEST_TMP/err")"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after repack failed"
start_mount "$archive" "$mnt" -o rw
kept_after repack "$TEST_TMP/inodes.4"
: > "$mnt/newer"
[ "$(stat -c %i "$mnt/newer")" -gt "$new_ino" ] ||
    fail "inode $(stat -c %i "$mnt/newer") after repack: numbers up to $new_ino were given before"
stop_mount "$mnt"
exit 0
