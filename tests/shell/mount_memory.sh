#!/bin/sh
# Memory: reading a trajectory more than 4 times as large as the cache,
# one file after the other and then all at once, keeps the daemon's peak
# resident memory (VmHWM) below cache_size + 64 MiB; the bytes read equal
# the originals.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

cache_mib=16
src=$TEST_TMP/src
generate_trajectory "$src/run" --layers 2 --width 256 --heads 4 --ctx 32 --batch 2 \
    --steps 25 --interval 5 --max-chars 20000 --optimizer
total=$(du -sb "$src" | cut -f1)
[ "$total" -gt $((4 * cache_mib << 20)) ] ||
    fail "the trajectory ($total bytes) is not 4 times the cache ($cache_mib MiB)"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run" || fail "create failed"
mnt=$TEST_TMP/mnt

start_mount "$archive" "$mnt" -o cache_size=${cache_mib}M
for f in "$src"/run/*; do
    cmp "$f" "$mnt/run/${f##*/}" || fail "${f##*/} differs"
done
if [ "$(id -u)" = 0 ]; then
    echo 1 > /proc/sys/vm/drop_caches # the kernel asks trajfs again
fi
pids=""
for f in "$src"/run/*; do
    cmp "$f" "$mnt/run/${f##*/}" &
    pids="$pids $!"
done
for p in $pids; do
    wait "$p" || fail "a parallel reader saw other bytes"
done
peak_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DAEMON_PID/status")
stop_mount "$mnt"
limit_kib=$(((cache_mib + 64) * 1024))
echo "$TEST_NAME: read $((total >> 20)) MiB with a $cache_mib MiB cache: peak RSS $((peak_kib / 1024)) MiB (limit $((limit_kib / 1024)) MiB)"
[ "$peak_kib" -lt "$limit_kib" ] || fail "peak RSS $peak_kib KiB, over $limit_kib KiB"
exit 0
