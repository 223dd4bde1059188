#!/bin/sh
# An archive behind a loopback lighttpd: trajpack list/verify/extract and
# trajfs mounts of its http:// URL give every file byte-identical, cold
# and warm (a disk cache, kept across mounts and shared by two at once);
# a warm mount fetches only the object's ends. A server killed, between
# reads or during one, gives EIO for the reads that need it, and the same
# mount serves them once it is back; a proxy that flips bytes, truncates or stalls responses gives
# EIO, never wrong bytes, and nothing damaged is kept in the cache.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/remotelib.sh"

src=$TEST_TMP/src
# Files larger than what opening fetches of the archive's ends.
generate_trajectory "$src" --layers 1 --width 128 --heads 2 --ctx 16 --batch 2 \
    --steps 6 --interval 2 --max-chars 20000 --dtype bf16 --optimizer
mkdir -p "$TEST_TMP/www"
"$TRAJPACK" create -q "$TEST_TMP/www/run.traj" "$src" || fail "create failed"
start_lighttpd "$TEST_TMP/www"
url=http://127.0.0.1:$HTTP_PORT/run.traj

# ---- trajpack ----
"$TRAJPACK" list "$TEST_TMP/www/run.traj" > "$TEST_TMP/list.local"
"$TRAJPACK" list "$url" > "$TEST_TMP/list.remote" || fail "list $url failed"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.remote" || fail "list differs"
"$TRAJPACK" verify "$url" | grep -q ": OK$" || fail "verify $url failed"
"$TRAJPACK" stats "$url" > /dev/null || fail "stats $url failed"
mkdir "$TEST_TMP/out"
"$TRAJPACK" extract "$url" -C "$TEST_TMP/out" || fail "extract $url failed"
assert_same_tree "$src" "$TEST_TMP/out/src"
# verify and extract hint the blobs they read next: a request fetches many.
# How many depends on how the fetchers and the reader are scheduled (a
# read that comes before the fetcher of its hint fetches its own batch),
# so each gets up to three tries: one within the bound shows the merging.
requests() { sed -n 's/.* \([0-9]*\) requests, .*/\1/p' "$1"; }
TRAJFS_REMOTE_STATS=1 "$TRAJPACK" verify -q "$url" > "$TEST_TMP/verify.out" 2> /dev/null
blobs=$(sed -n 's/.* files, \([0-9]*\) blobs.*/\1/p' "$TEST_TMP/verify.out")
for what in verify extract; do
    for try in 1 2 3; do
        rm -rf "$TEST_TMP/out2" && mkdir "$TEST_TMP/out2"
        case $what in
            verify) TRAJFS_REMOTE_STATS=1 "$TRAJPACK" verify -q "$url" > /dev/null 2> "$TEST_TMP/$what.err" ;;
            extract) TRAJFS_REMOTE_STATS=1 "$TRAJPACK" extract -q "$url" -C "$TEST_TMP/out2" 2> "$TEST_TMP/$what.err" ;;
        esac || fail "trajpack $what $url failed"
        n=$(requests "$TEST_TMP/$what.err")
        echo "trajpack $what of $blobs blobs, try $try: $n requests"
        [ -n "$n" ] && [ "$n" -le $((blobs / 4)) ] && break
        [ "$try" = 3 ] && fail "trajpack $what sent $n requests for $blobs blobs (three tries)"
    done
done
"$TRAJPACK" list "http://127.0.0.1:$HTTP_PORT/none.traj" 2> "$TEST_TMP/err" && fail "a missing URL listed"
grep -q "404" "$TEST_TMP/err" || fail "no 404 in: $(cat "$TEST_TMP/err")"
"$TRAJPACK" add "$url" "$src" 2> /dev/null && fail "add to a URL succeeded"

# ---- mounts: cold, warm, two sharing the cache ----
cache=$TEST_TMP/cache
export TRAJFS_REMOTE_STATS=1
start_mount "$url" "$TEST_TMP/m1" -o cache_dir="$cache"
all_same "$src" "$TEST_TMP/m1/src"
fusermount3 -u "$TEST_TMP/m1"
wait "$DAEMON_PID" || fail "trajfs exited with an error"
cold=$(requests "$TEST_TMP/m1.log")
[ -n "$cold" ] && [ "$(ls "$cache"/* | wc -l)" -gt 0 ] || fail "nothing cached: $(cat "$TEST_TMP/m1.log")"
# A blob the cold mount asked for ahead but found decoded in memory may
# still have been on its way at the unmount, and not in the cache: a
# verify through the cache reads every blob once, so that the warm
# mounts below find all they read there.
TRAJFS_REMOTE_OPTIONS=cache_dir=$cache "$TRAJPACK" verify -q "$url" > /dev/null 2>&1 ||
    fail "verify through the cache failed"

start_mount "$url" "$TEST_TMP/m1" -o cache_dir="$cache"
first=$DAEMON_PID
start_mount "$url" "$TEST_TMP/m2" -o cache_dir="$cache"
all_same "$src" "$TEST_TMP/m1/src"
all_same "$src" "$TEST_TMP/m2/src"
fusermount3 -u "$TEST_TMP/m1"
fusermount3 -u "$TEST_TMP/m2"
# Their counts of requests are written as they exit.
wait_daemon "$first" || fail "the first warm mount exited with an error"
wait_daemon "$DAEMON_PID" || fail "the second warm mount exited with an error"
for m in m1 m2; do
    warm=$(requests "$TEST_TMP/$m.log")
    # The ends tell what the object is now: always fetched; all else cached.
    [ "$warm" = 2 ] || fail "a warm mount sent $warm requests (cold: $cold): $(cat "$TEST_TMP/$m.log")"
done

# A cache entry damaged on disk is refetched, never served.
for f in "$cache"/*/*; do
    printf 'X' | dd of="$f" bs=1 seek=40 conv=notrunc 2> /dev/null
done
start_mount "$url" "$TEST_TMP/m1" -o cache_dir="$cache"
all_same "$src" "$TEST_TMP/m1/src"
fusermount3 -u "$TEST_TMP/m1"
unset TRAJFS_REMOTE_STATS

# ---- the server killed, then back ----
fast="timeout=1,connect_timeout=1,retries=1"
start_mount "$url" "$TEST_TMP/m3" -o "$fast" -o direct_io
files=$(cd "$src" && find . -type f -name '*.safetensors' | sort)
first=$(echo "$files" | head -1) last=$(echo "$files" | tail -1)
cmp "$src/$first" "$TEST_TMP/m3/src/$first" || fail "$first differs"
stop_pid "$LIGHTTPD_PID"
expect_eio "$TEST_TMP/m3/src/$last"
ls "$TEST_TMP/m3/src" > /dev/null || fail "the mount is gone"
restart_lighttpd || fail "lighttpd did not start again"
cmp "$src/$last" "$TEST_TMP/m3/src/$last" || fail "$last differs once the server is back"
fusermount3 -u "$TEST_TMP/m3"

# ---- a proxy that damages responses ----
start_proxy "http://127.0.0.1:$HTTP_PORT"
purl=http://127.0.0.1:$PROXY_PORT/run.traj
for mode in "flip" "truncate" "delay 3"; do
    # A cache of its own: the last one's holds the file read.
    start_mount "$purl" "$TEST_TMP/m4" -o "$fast" -o direct_io -o cache_dir="$TEST_TMP/pcache.${mode% *}"
    echo "$mode" > "$PROXY_MODE"
    expect_eio "$TEST_TMP/m4/src/$last"
    echo pass > "$PROXY_MODE"
    cmp "$src/$last" "$TEST_TMP/m4/src/$last" || fail "$last differs after the proxy's $mode"
    fusermount3 -u "$TEST_TMP/m4"
done
grep -q "^flip" "$PROXY_MODE.log" || fail "nothing went through the proxy"

# ---- the server killed while a read is in flight, then back ----
# The proxy is the server here: it sends half of a response and stalls,
# and is killed meanwhile. The read fails with EIO once the retries find
# nothing listening, before a stall of the 5 s timeout could have ended
# it (the server's death is noticed, not waited out); what is cached
# still reads; back on its port, the same read
# succeeds.
start_mount "$purl" "$TEST_TMP/m5" -o timeout=5,connect_timeout=1,retries=1 -o direct_io \
    -o cache_dir="$TEST_TMP/kcache"
cmp "$src/$first" "$TEST_TMP/m5/src/$first" || fail "$first differs"
echo "stall 60" > "$PROXY_MODE"
: > "$PROXY_MODE.log"
t0=$(date +%s%N)
"$PYTHON" -c '
import errno, sys
try:
    open(sys.argv[1], "rb").read()
    print("read")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$TEST_TMP/m5/src/$last" > "$TEST_TMP/inflight" 2>&1 &
reader=$!
for _ in $(seq 100); do
    grep -q "^stall" "$PROXY_MODE.log" && break
    sleep 0.05
done
grep -q "^stall" "$PROXY_MODE.log" || fail "the read did not reach the proxy"
sleep 0.5 # the first half of the response is there
stop_pid "$PROXY_PID"
wait "$reader" || true
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$(cat "$TEST_TMP/inflight")" = EIO ] ||
    fail "a read in flight when the server died gave: $(cat "$TEST_TMP/inflight")"
[ "$ms" -lt 5000 ] || fail "a read in flight when the server died took $ms ms to fail (timeout=5)"
echo "a read in flight when the server died failed with EIO after $ms ms"
cmp "$src/$first" "$TEST_TMP/m5/src/$first" || fail "$first, cached, does not read with the server gone"
start_proxy "http://127.0.0.1:$HTTP_PORT" "$PROXY_PORT"
cmp "$src/$last" "$TEST_TMP/m5/src/$last" || fail "$last differs once the server is back"
fusermount3 -u "$TEST_TMP/m5"
# What the flipping proxy sent is not served from the cache by a new mount.
start_mount "$purl" "$TEST_TMP/m4" -o direct_io -o cache_dir="$TEST_TMP/pcache.flip"
all_same "$src" "$TEST_TMP/m4/src"
fusermount3 -u "$TEST_TMP/m4"
no_sanitizer_report "$TEST_TMP"/*.log
echo "PASS: $TEST_NAME"
