#!/bin/sh
# A hostile torch.save file: its data.pkl is PROTO, NONE and 4 MiB of
# TUPLE1 (each tuple holding the last). It is stored byte-identical, as
# opaque bytes with a note saying why, by trajpack create and through a
# writable mount, each with a peak resident memory (ru_maxrss of
# trajpack, VmHWM of the daemon) of at most 16 times the pickle and
# 64 MiB.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

src=$TEST_TMP/src
mkdir -p "$src"
pickle_bytes=$((4 << 20))
"$PYTHON" - "$src/hostile.pt" "$pickle_bytes" <<'PY' || fail "making the file failed"
import sys, zipfile
path, n = sys.argv[1], int(sys.argv[2])
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02N" + b"\x85" * n + b".")
    z.writestr("archive/version", b"3\n")
PY
limit_kib=$(((16 * pickle_bytes >> 10) + 64 * 1024))

archive=$TEST_TMP/a.traj
"$PYTHON" - "$TRAJPACK" create -q "$archive" "$src" > "$TEST_TMP/rss" <<'PY' || fail "trajpack create failed"
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)
PY
peak_kib=$(cat "$TEST_TMP/rss")
echo "$TEST_NAME: trajpack create: peak RSS $((peak_kib / 1024)) MiB (limit $((limit_kib / 1024)) MiB)"
[ "$peak_kib" -le "$limit_kib" ] || fail "trajpack create: peak RSS $peak_kib KiB, over $limit_kib KiB"
mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out" || fail "extract failed"
cmp "$src/hostile.pt" "$TEST_TMP/out/src/hostile.pt" || fail "the file extracts otherwise"
"$TRAJPACK" stats "$archive" > "$TEST_TMP/stats" 2>&1 || fail "stats failed"
grep -q "nests more than" "$TEST_TMP/stats" ||
    fail "stats does not say why the file is opaque: $(cat "$TEST_TMP/stats")"

mnt=$TEST_TMP/mnt
start_mount "$TEST_TMP/b.traj" "$mnt" -o rw
cp "$src/hostile.pt" "$mnt/" || fail "cp into the mount failed"
peak_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DAEMON_PID/status")
cmp "$src/hostile.pt" "$mnt/hostile.pt" || fail "the file reads back otherwise"
stop_mount "$mnt"
echo "$TEST_NAME: writable mount: peak RSS $((peak_kib / 1024)) MiB (limit $((limit_kib / 1024)) MiB)"
[ "$peak_kib" -le "$limit_kib" ] || fail "the daemon's peak RSS was $peak_kib KiB, over $limit_kib KiB"
exit 0
