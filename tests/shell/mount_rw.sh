#!/bin/sh
# The writable mount with cp: a whole trajectory copied with `cp -r` into
# the mount of an archive that does not exist yet (-o rw creates it) is
# byte-identical after the unmount, to `trajpack verify`, to `trajpack
# extract` and through a read-only remount; `cp -p` keeps modes and
# times; an overwritten file keeps its inode number; a large file is
# spooled on disk, not in the daemon's memory; reads are served while a
# commit encodes; while the mount stands it is the archive's writer; a
# daemon (no -f) commits too.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

src=$TEST_TMP/src
generate_tiny_trajectory "$src/run"
archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt

# ---- cp -r into a new archive ----
start_mount "$archive" "$mnt" -o rw
[ -f "$archive" ] || fail "the rw mount did not create $archive"
assert_mounted_rw "$mnt"
cp -r "$src/run" "$mnt/" || fail "cp -r into the mount failed"
diff -r "$src/run" "$mnt/run" > /dev/null || fail "the mount shows other files than were copied in"

# The mount is the archive's single writer.
if "$TRAJPACK" add -q "$archive" "$src/run/config.json" 2> "$TEST_TMP/err"; then
    fail "trajpack add ran beside the rw mount"
fi
grep -q 'another writer' "$TEST_TMP/err" || fail "trajpack add said: $(cat "$TEST_TMP/err")"

# cp -p: permission bits and modification time (to the nanosecond).
chmod 0640 "$src/run/config.json"
touch -d '2020-01-02 03:04:05.123456789' "$src/run/config.json"
cp -p "$src/run/config.json" "$mnt/config.json" || fail "cp -p failed"
[ "$(stat -c '%a %y' "$mnt/config.json")" = "$(stat -c '%a %y' "$src/run/config.json")" ] ||
    fail "cp -p: $(stat -c '%a %y' "$mnt/config.json"), not $(stat -c '%a %y' "$src/run/config.json")"

# Overwriting a file in place: same inode, new content for a new open.
ino=$(stat -c %i "$mnt/run/config.json")
printf 'replaced\n' > "$mnt/run/config.json" || fail "overwriting a file failed"
[ "$(cat "$mnt/run/config.json")" = replaced ] || fail "the overwritten file reads $(cat "$mnt/run/config.json")"
[ "$(stat -c %i "$mnt/run/config.json")" = "$ino" ] || fail "an overwritten file got a new inode number"
cp "$src/run/config.json" "$mnt/run/config.json"

# A large file waits for its commit in the spool (on disk): the daemon's
# anonymous memory does not grow with it while it is written.
"$PYTHON" - "$mnt/big" "$DAEMON_PID" > "$TEST_TMP/rss" <<'PY' || fail "writing a large file failed"
import sys
path, pid = sys.argv[1], sys.argv[2]
def rss_anon():
    for line in open("/proc/%s/status" % pid):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
chunk = bytes(range(256)) * 4096
with open(path, "wb") as f:
    before = rss_anon()
    for _ in range(128):
        f.write(chunk)
    f.flush()
    print(rss_anon() - before)
PY
grew=$(cat "$TEST_TMP/rss")
[ "$grew" -lt 32768 ] || fail "the daemon's anonymous memory grew by $grew KiB while 128 MiB were written"
[ "$(file_size "$mnt/big")" = 134217728 ] || fail "the large file has $(file_size "$mnt/big") bytes"
rm "$mnt/big"

# Reads go on while a commit encodes: once the archive grows (the close()
# of a large checkpoint is committing it), a checkpoint is opened and read
# whole and its directory listed, round after round until the close
# returns. At least three rounds must end before it does: one read that
# waited for the commit may still end just before. A writer mount keeps
# no pages across opens, so every round reaches the daemon. Where the
# commit is too quick for three rounds (many cores), the checkpoints are
# made larger; reads that wait for commits fail at any size.
"$PYTHON" - "$mnt" run/bf16/step-000006.safetensors "$archive" <<'PY' || fail "reads waited for a commit (above)"
import json, os, sys, threading, time
mnt, other, archive = sys.argv[1], os.path.join(sys.argv[1], sys.argv[2]), sys.argv[3]

def commit_while_reading(n):
    """Writes two checkpoints of n F32 elements of noise (the second is
    encoded against the first) and reads while the second's close()
    commits it. Returns the rounds of reads that ended before it returned."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    header += b" " * (-len(header) % 8)
    paths = [os.path.join(mnt, "slow-%d.safetensors" % step) for step in (1, 2)]
    for path in paths:
        f = open(path, "wb")
        f.write(len(header).to_bytes(8, "little") + header)
        for _ in range(n >> 20):
            f.write(os.urandom(4 << 20))
        if path == paths[0]:
            f.close()
    before = os.stat(archive).st_size
    closed = threading.Event()
    def close():
        f.close()
        closed.set()
    closer = threading.Thread(target=close)
    closer.start()
    while os.stat(archive).st_size == before and not closed.is_set():
        time.sleep(0.001)
    rounds = 0
    while not closed.is_set():
        with open(other, "rb") as g:
            g.read()
        os.listdir(os.path.dirname(other))
        if not closed.is_set():
            rounds += 1
    closer.join()
    for path in paths:
        os.unlink(path)
    return rounds

for n in (16 << 20, 64 << 20):
    rounds = commit_while_reading(n)
    print("%d MiB checkpoints: %d rounds of reads during the commit" % (4 * n >> 20, rounds))
    if rounds >= 3:
        sys.exit(0)
sys.exit("fewer than 3 rounds of reads ended while the close() of a 256 MiB checkpoint committed it")
PY
stop_mount "$mnt"

# ---- the archive on its own ----
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed"
mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out" || fail "extract failed"
diff -r "$src/run" "$TEST_TMP/out/run" > /dev/null || fail "extract gives other files"
cmp "$src/run/config.json" "$TEST_TMP/out/config.json" || fail "config.json differs after extract"
[ ! -e "$TEST_TMP/out/big" ] || fail "a removed file was extracted"
"$TRAJPACK" list -l "$archive" | grep -q 'ulp' || fail "no checkpoint was stored as deltas"

# ---- a read-only remount ----
start_mount "$archive" "$mnt"
diff -r "$src/run" "$mnt/run" > /dev/null || fail "a read-only remount shows other files"
if touch "$mnt/new" 2> /dev/null; then fail "created a file in a read-only remount"; fi
stop_mount "$mnt"

# ---- as a daemon (no -f: the process forks after mounting) ----
"$TRAJFS" "$archive" "$mnt" -o rw || fail "trajfs -o rw as a daemon failed"
MOUNTED="$MOUNTED $mnt"
DAEMONS="$DAEMONS $(pgrep -f -- "$TRAJFS $archive $mnt" || true)"
printf 'daemon\n' > "$mnt/from-daemon" || fail "writing through a daemon's mount failed"
fusermount3 -u "$mnt" || fail "fusermount3 -u failed"
wait_gone "$TRAJFS $archive"
"$TRAJPACK" list "$archive" | grep -qx from-daemon || fail "the daemon did not commit"
exit 0
