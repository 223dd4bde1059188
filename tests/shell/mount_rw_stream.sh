#!/bin/sh
# A new file of a writable mount is encoded while it is written, and its
# close commits it (tests/tools/stream_writes.py writes the files):
# - a checkpoint written slowly: while it pauses, the archive has grown by
#   its encoded bytes but lists the old files only, the mount reads its
#   other files and does not show the new one, and the writer reads back
#   what it wrote; after its close the mount shows it byte-identical;
# - a mkdir while a file waits for its next bytes is done at once (the
#   encoding gives way), and the file still commits;
# - a file rewritten (O_TRUNC) while its first version's close runs: the
#   second version wins;
# - files written out of order (the header last, a range written twice, a
#   truncation and the rest written again) commit as written;
# - a write that fails mid-file (the spool directory full): the archive
#   lists what it did before and verifies, and the next file commits.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

WRITES=$top_srcdir/tests/tools/stream_writes.py
small=$TEST_TMP/small
trap 'mount_cleanup; ! is_mounted "$small" || umount "$small"; rm -rf "$TEST_TMP"' EXIT

data=$TEST_TMP/data
mkdir -p "$data"
"$PYTHON" "$WRITES" make "$data" || fail "stream_writes.py make failed"
archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o rw
mkdir "$mnt/run"
cp "$data/v1.safetensors" "$mnt/run/step-1.safetensors" || fail "cp of the first checkpoint failed"

# slow_write SRC DST: starts the slow writer and waits for its pause.
slow_write() {
    rm -f "$TEST_TMP/paused" "$TEST_TMP/go"
    "$PYTHON" "$WRITES" slow "$1" "$2" "$TEST_TMP/paused" "$TEST_TMP/go" &
    writer=$!
    for _ in $(seq 1200); do
        [ -e "$TEST_TMP/paused" ] && return 0
        kill -0 "$writer" 2> /dev/null || fail "the slow writer of $2 ended before its pause"
        sleep 0.05
    done
    fail "the slow writer of $2 did not pause"
}

# finish_write DST SRC: lets the writer go on; its close must succeed and
# the mount show SRC's bytes.
finish_write() {
    touch "$TEST_TMP/go"
    wait "$writer" || fail "the slow writer of $1 failed"
    cmp -s "$2" "$1" || fail "$1 reads back otherwise than written"
}

before=$(file_size "$archive")
slow_write "$data/v2.safetensors" "$mnt/run/step-2.safetensors"
grown=""
for _ in $(seq 600); do
    [ "$(file_size "$archive")" -gt "$before" ] && { grown=1; break; }
    sleep 0.1
done
[ -n "$grown" ] || fail "the archive did not grow while step-2 was written ($before bytes)"
listed=$("$TRAJPACK" list "$archive" | LC_ALL=C sort | tr '\n' ' ')
[ "$listed" = "run/ run/step-1.safetensors " ] ||
    fail "while step-2 is written the archive lists: $listed"
cmp -s "$data/v1.safetensors" "$mnt/run/step-1.safetensors" ||
    fail "step-1 reads otherwise while step-2 is written"
[ "$(ls "$mnt/run")" = "step-1.safetensors" ] || fail "the mount shows $(ls "$mnt/run" | tr '\n' ' ')"
finish_write "$mnt/run/step-2.safetensors" "$data/v2.safetensors"

slow_write "$data/v3.safetensors" "$mnt/run/step-3.safetensors"
timeout 60 mkdir "$mnt/run/logs" || fail "mkdir while step-3 waits for its bytes did not finish"
finish_write "$mnt/run/step-3.safetensors" "$data/v3.safetensors"

"$PYTHON" "$WRITES" rewrite "$data/v1.safetensors" "$data/v2.safetensors" "$mnt/run/step-4.safetensors" ||
    fail "rewriting step-4 while its first version commits failed"
cmp -s "$data/v2.safetensors" "$mnt/run/step-4.safetensors" || fail "step-4 is not its second version"
for how in scatter again shrink; do
    "$PYTHON" "$WRITES" "$how" "$data/v3.safetensors" "$mnt/run/$how.safetensors" ||
        fail "writing $how.safetensors failed"
    cmp -s "$data/v3.safetensors" "$mnt/run/$how.safetensors" || fail "$how.safetensors reads back otherwise"
done
stop_mount "$mnt"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed"

start_mount "$archive" "$mnt"
for f in step-2:v2 step-3:v3 step-4:v2 scatter:v3 again:v3 shrink:v3; do
    cmp -s "$data/${f#*:}.safetensors" "$mnt/run/${f%%:*}.safetensors" ||
        fail "after a remount run/${f%%:*}.safetensors reads otherwise"
done
[ -d "$mnt/run/logs" ] || fail "run/logs is gone after a remount"
stop_mount "$mnt"

# A spool directory of 4 MiB: the 6 MiB file's writes fail part way.
mkdir -p "$small"
mount -t tmpfs -o size=4m tmpfs "$small" || fail "cannot mount a tmpfs at $small"
listed=$("$TRAJPACK" list "$archive" | LC_ALL=C sort)
start_mount "$archive" "$mnt" -o rw,spool_dir="$small"
got=$("$PYTHON" "$WRITES" fill "$data/v1.safetensors" "$mnt/run/full.safetensors") ||
    fail "the writer of full.safetensors failed"
[ "${got% *}" = ENOSPC ] || fail "writing 6 MiB into a 4 MiB spool gave: $got"
[ ! -e "$mnt/run/full.safetensors" ] || fail "full.safetensors was committed"
head -c 100000 "$data/v1.safetensors" > "$TEST_TMP/small.bin"
cp "$TEST_TMP/small.bin" "$mnt/run/after.bin" || fail "cp after the failed write failed"
stop_mount "$mnt"
umount "$small"
[ "$("$TRAJPACK" list "$archive" | LC_ALL=C sort | grep -vx run/after.bin)" = "$listed" ] ||
    fail "the failed write changed the archive's files"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after the failed write failed"
start_mount "$archive" "$mnt"
cmp -s "$TEST_TMP/small.bin" "$mnt/run/after.bin" || fail "after.bin reads otherwise"
stop_mount "$mnt"
