#!/bin/sh
# A following mount reads the kept files right while another writer
# removes checkpoints and gives their space back: payloads punched,
# chunks of kept files rebased (their slots redirected to new bytes) and
# the chains they had punched too, commits the following mount applies
# only at its next look. The following mount (read-only, -o follow=3,
# direct_io, a 1 MiB chunk cache and an archive of 4096-element chunks:
# reads decode from the archive) serves the kept files of a run of 16
# checkpoints with optimizer state to a reader that compares them with
# their sources over and over, while every checkpoint but every 4th is
# removed through remove_paths (retentionlib.sh: a writable mount of the
# same archive, the writer), a checkpoint at a time, the reader going
# once more over all kept files after each: every read must match,
# every time, and some must have met payloads given back before the
# mount looked (their reads fail their checksums, ask for a look and
# read again). A descriptor of a kept file opened before the first
# removal reads it whole after the last. Then, waiting for the event
# (bounded: the follow interval and 10 s), the removed files are gone
# from the following mount and the kept files read right once more.
# With RETENTION_FOLLOW_REMOTE set (retention_follow_remote.sh), the
# following mount reads the archive from lighttpd on 127.0.0.1, as a URL:
# holes punched read as zeros there too, and the server's ETag changes.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/retentionlib.sh"
[ -z "${RETENTION_FOLLOW_REMOTE:-}" ] || . "$(dirname "$0")/remotelib.sh"

FOLLOW=3 # seconds (wait_for): longer than a removal and a round of reads
export TRAJFS_FOLLOW_TRACE=1 # followed

src=$TEST_TMP/src
generate_retention_run "$src/run"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q --chunk-shift 12 "$archive" "$src/run" || fail "create failed"
live_files "$archive" > "$TEST_TMP/all.list"
steps=$(cd "$src/run" && ls step-*.optim.safetensors | sed 's/^step-\([0-9]*\)\..*/\1/')
: > "$TEST_TMP/removed.steps"
i=0
for s in $steps; do
    i=$((i + 1))
    [ $((i % 4)) -eq 0 ] || echo "$s" >> "$TEST_TMP/removed.steps"
done
sed 's|.*|run/step-&.safetensors\nrun/step-&.optim.safetensors|' "$TEST_TMP/removed.steps" \
    > "$TEST_TMP/removed"
grep -vxFf "$TEST_TMP/removed" "$TEST_TMP/all.list" > "$TEST_TMP/kept"
[ "$(wc -l < "$TEST_TMP/kept")" -eq 9 ] || fail "expected 8 checkpoint files and config.json kept"

followed_archive=$archive
if [ -n "${RETENTION_FOLLOW_REMOTE:-}" ]; then
    start_lighttpd "$TEST_TMP"
    followed_archive=http://127.0.0.1:$HTTP_PORT/a.traj
fi
mnt=$TEST_TMP/follow
start_mount "$followed_archive" "$mnt" -o follow=$FOLLOW,direct_io,cache_size=1M
follow_pid=$DAEMON_PID

# The reader: rounds over the kept files until $TEST_TMP/stop exists,
# each read compared with its source; a mismatch or error is logged in
# $TEST_TMP/bad, the rounds done in $TEST_TMP/rounds.
echo 0 > "$TEST_TMP/rounds"
: > "$TEST_TMP/bad"
reader=""
# The reader goes first: it holds files of the mount open.
trap '[ -z "$reader" ] || kill "$reader" 2> /dev/null; mount_cleanup; rm -rf "$TEST_TMP"' EXIT
(
    n=0
    while [ ! -e "$TEST_TMP/stop" ]; do
        while IFS= read -r p; do
            cmp "$mnt/$p" "$src/$p" > "$TEST_TMP/cmp.out" 2>&1 ||
                echo "round $((n + 1)): $p: $(cat "$TEST_TMP/cmp.out")" >> "$TEST_TMP/bad"
        done < "$TEST_TMP/kept"
        n=$((n + 1))
        echo "$n" > "$TEST_TMP/rounds.new"
        mv "$TEST_TMP/rounds.new" "$TEST_TMP/rounds"
    done
) &
reader=$!

rounds() { cat "$TEST_TMP/rounds"; }
# round_after N: waits until the reader has ended a round begun after
# it had done N (two more).
round_after() {
    _want=$(($1 + 2))
    until [ "$(rounds)" -ge "$_want" ]; do
        kill -0 "$reader" 2> /dev/null || fail "the reader stopped"
        sleep 0.01
    done
}
stop_reader() {
    touch "$TEST_TMP/stop"
    wait "$reader" || fail "the reader failed"
    reader=""
}
round_after 0
# A descriptor of a kept file that a removal rebases (the oldest kept
# checkpoint's optimizer state: deltas against the next, removed).
held_path=run/step-$(echo "$steps" | sed -n 4p).optim.safetensors
exec 3< "$mnt/$held_path"

start=$(rounds)
while IFS= read -r s; do
    remove_paths "$archive" "run/step-$s.safetensors" "run/step-$s.optim.safetensors"
    round_after "$(rounds)"
done < "$TEST_TMP/removed.steps"
during=$(($(rounds) - start))
cmp - "$src/$held_path" <&3 || fail "a descriptor opened before the removals does not read $held_path whole"
exec 3<&-

# The removed files leave the following mount.
while IFS= read -r p; do
    wait_for "$p removed" test ! -e "$mnt/$p" > /dev/null
done < "$TEST_TMP/removed"
followed "$mnt.log"
round_after "$(rounds)"
stop_reader
if [ -s "$TEST_TMP/bad" ]; then
    fail "$(wc -l < "$TEST_TMP/bad") reads of kept files through the following mount went wrong: $(head -n 5 "$TEST_TMP/bad")"
fi
list_files "$mnt" > "$TEST_TMP/shown"
LC_ALL=C sort "$TEST_TMP/kept" | cmp -s - "$TEST_TMP/shown" ||
    { diff "$TEST_TMP/kept" "$TEST_TMP/shown" >&2; fail "the following mount shows other files"; }
while IFS= read -r p; do
    cmp "$mnt/$p" "$src/$p" || fail "after the removals: $p differs through the following mount"
done < "$TEST_TMP/kept"
retried=$(grep -c 'asked by a failed read' "$mnt.log" || true)
DAEMON_PID=$follow_pid
stop_mount "$mnt"
"$TRAJPACK" verify -q "$archive" > /dev/null 2> "$TEST_TMP/err" || fail "verify failed: $(cat "$TEST_TMP/err")"
echo "$TEST_NAME: $during rounds over the $(wc -l < "$TEST_TMP/kept") kept files during" \
    "$(wc -l < "$TEST_TMP/removed.steps") removals, all right; $retried reads retried after a look they asked for"
[ "$retried" -gt 0 ] ||
    fail "no read met a payload given back before the mount looked: the removals were not raced"
# The daemon's log: its looks, and nothing but reads retried.
if grep -v 'follow: look [0-9]* done\|unmounted; [0-9]* blobs decoded' "$mnt.log" > "$TEST_TMP/said"; then
    fail "the following mount said: $(head -n 5 "$TEST_TMP/said")"
fi
exit 0
