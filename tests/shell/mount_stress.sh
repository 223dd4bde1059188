#!/bin/sh
# Stress of a writable mount: 16 readers and 1 writer for STRESS_SECONDS
# (default 30), then a clean unmount.
#
# The archive starts with NFILES checkpoints of a run (run/, one keyframe
# and deltas). The writer copies the run's next NEW_FILES checkpoints into
# run/ with cp (each commit a delta whose parent the daemon decodes from
# the archive), then, until the time is up, each again as a copy renamed
# over it (as rsync does) while readers may hold it open. After each new
# file's cp exited 0 it lists the file for the readers
# (tests/tools/stress_read): 16 threads that open random listed files and
# read them whole or in random pread windows, comparing every byte and
# every length with the original.
#
# Then: the daemon exits 0 at its unmount and its messages show no
# sanitizer report (in a build with --enable-sanitizers, LeakSanitizer
# checks the daemon for leaks as it exits: a leak fails the test);
# `trajpack verify` passes and lists every file the writer committed, and
# no renamed copy is left; and, in a build without sanitizers, the
# daemon's peak resident memory (VmHWM) is at most cache_size +
# BASE_MIB + THREADS x SEARCH_MIB.
#
# What is not cache: libfuse's request buffers and the read buffers of
# its threads, chunks being decoded, the commit in progress (the file
# mapped, its parent's tensors, the encoder's buffers), and the
# chunk-sized blocks glibc keeps in its arenas once freed (a writable
# mount keeps glibc's mmap threshold, see trajfs.c): BASE_MIB; and for a
# keyframe, the program search of each encoder thread, whose open states
# are bounded by 32 MiB (codec/prog/prog_search.h), with its sample's words:
# SEARCH_MIB. Measured on 2 CPUs with threads=10 (which fixes the number
# of threads, and so of arenas, whatever the machine): without keyframes
# (max_chain=1000) peaks of 181 to 186 MiB for the 64 MiB cache; with
# the default max_chain (keyframes among the commits) 262 to 277 MiB. A
# separate cache of the writer's, as before the mount shared its cache
# with it, peaked at 281 MiB without keyframes, and a program search
# without its memory bound takes some 250 bytes per element.
#
# Prints: seconds, readers, files written, bytes verified, peak RSS.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

DURATION=${STRESS_SECONDS:-30}
READERS=16
CACHE_MIB=64
THREADS=10
BASE_MIB=160
SEARCH_MIB=36
NFILES=40        # checkpoints in the archive at the start
NEW_FILES=20     # checkpoints of the same run the writer adds
ELEMENTS=800000  # some 1.8 MB a checkpoint: 40 of them exceed the cache

STRESS_READ=$TOOLS/stress_read
[ -x "$STRESS_READ" ] || fail "$STRESS_READ not built (make check builds it)"

sanitized=false
if ldd "$TRAJFS" 2> /dev/null | grep -q 'libasan\|libtsan'; then
    sanitized=true
fi

src=$TEST_TMP/src run=$TEST_TMP/run
mkdir "$src" "$run"
"$PYTHON" "$WRITE_CHECKPOINTS" "$src" 1 $((NFILES + NEW_FILES)) "$ELEMENTS" ||
    fail "write_checkpoints.py failed"
list=$TEST_TMP/list
for i in $(seq 1 "$NFILES"); do
    ln "$src/step-$i.safetensors" "$run/"
    printf 'run/step-%s.safetensors\t%s/step-%s.safetensors\n' "$i" "$src" "$i"
done > "$list"
archive=$TEST_TMP/a.traj
# No keyframe but the first (quicker to create, and the writer's commits
# stay deltas: no program search, whose memory would dwarf the cache).
"$TRAJPACK" create -q --max-chain 1000 "$archive" "$run" || fail "create failed"

mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o rw,cache_size=${CACHE_MIB}M,threads=$THREADS
daemon=$DAEMON_PID

# First, alone: a file replaced by a rename while open still fstats and
# reads as the version it opened once the kernel asks the daemon again
# (after the attribute timeout of a writable mount, 1 s), with no link,
# as on a local file system.
"$PYTHON" - "$mnt" <<'PY' || fail "a file replaced while open (above)"
import os, sys, time
d = sys.argv[1]
name, other = os.path.join(d, "probe.bin"), os.path.join(d, ".probe.new")
want = os.urandom(5000)
with open(name, "wb") as f:
    f.write(want)
fd = os.open(name, os.O_RDONLY)
with open(other, "wb") as f:
    f.write(b"other bytes")
os.rename(other, name)
time.sleep(1.5)
st = os.fstat(fd)
assert (st.st_size, st.st_nlink) == (len(want), 0), \
    "fstat gives size %d and %d links, not %d and 0" % (st.st_size, st.st_nlink, len(want))
assert os.pread(fd, len(want) + 1, 0) == want, "the open descriptor reads other bytes"
os.close(fd)
assert os.path.getsize(name) == len(b"other bytes"), "the name is not the new file's"
os.unlink(name)
PY

# The writer: the next checkpoints of the run, each a new file; then, until
# the time is up, each again as a copy renamed over it (as rsync does).
deadline=$(($(date +%s) + DURATION))
: > "$TEST_TMP/commits"
sh -c '
    src=$1 dir=$2 list=$3 commits=$4 first=$5 last=$6 deadline=$7
    round=1
    while :; do
        for i in $(seq "$first" "$last"); do
            [ "$(date +%s)" -lt "$deadline" ] || exit 0
            f=step-$i.safetensors
            if [ "$round" = 1 ]; then
                cp "$src/$f" "$dir/$f" || exit 1
                printf "run/%s\t%s/%s\n" "$f" "$src" "$f" >> "$list"
            else
                cp "$src/$f" "$dir/.$f.stress" || exit 1
                mv "$dir/.$f.stress" "$dir/$f" || exit 1
            fi
            echo "$f" >> "$commits"
        done
        round=$((round + 1))
    done' stress-writer "$src" "$mnt/run" "$list" "$TEST_TMP/commits" $((NFILES + 1)) \
    $((NFILES + NEW_FILES)) "$deadline" 2> "$TEST_TMP/writer.err" &
writer=$!
"$STRESS_READ" "$mnt" "$list" "$DURATION" "$READERS" > "$TEST_TMP/readers.out" 2> "$TEST_TMP/readers.err" &
readers=$!

# VmRSS and VmHWM of the daemon (KiB) every second while the readers run.
: > "$TEST_TMP/rss"
while kill -0 "$readers" 2> /dev/null; do
    awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r, h }' "/proc/$daemon/status" \
        >> "$TEST_TMP/rss" 2> /dev/null || true
    sleep 1
done
readers_rc=0
wait "$readers" || readers_rc=$?
writer_rc=0
wait "$writer" || writer_rc=$?
kill -0 "$daemon" 2> /dev/null || fail "the daemon died: $(tail -n 30 "$mnt.log")"
peak_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$daemon/status")
[ "$readers_rc" -eq 0 ] || fail "the readers failed: $(cat "$TEST_TMP/readers.err")"
[ "$writer_rc" -eq 0 ] || fail "the writer failed: $(cat "$TEST_TMP/writer.err")"
fusermount3 -u "$mnt" || fail "fusermount3 -u $mnt failed"
daemon_rc=0
wait_daemon "$daemon" || daemon_rc=$?
no_sanitizer_report "$mnt.log"
[ "$daemon_rc" -eq 0 ] || fail "trajfs exited with status $daemon_rc after its unmount: $(tail -n 20 "$mnt.log")"

written=$(wc -l < "$TEST_TMP/commits")
added=$(grep -c "^run/step-" "$list")
[ "$added" -gt "$NFILES" ] || fail "the writer committed no file in $DURATION s"
"$TRAJPACK" verify -q "$archive" > /dev/null 2> "$TEST_TMP/err" || fail "verify failed: $(cat "$TEST_TMP/err")"
"$TRAJPACK" list "$archive" > "$TEST_TMP/listed" || fail "list failed"
if cut -f1 "$list" | grep -vxFf "$TEST_TMP/listed" > "$TEST_TMP/missing"; then
    fail "committed but not listed: $(head -n 3 "$TEST_TMP/missing")"
fi
if grep '/\.' "$TEST_TMP/listed" > "$TEST_TMP/left"; then
    fail "a copy renamed over a file is left: $(cat "$TEST_TMP/left")"
fi
last=$(tail -n 1 "$TEST_TMP/commits")
"$TRAJPACK" extract -q "$archive" "run/$last" -O | cmp -s - "$src/$last" ||
    fail "run/$last, the writer's last commit, differs"

bytes=$(sed -n 's/.* \([0-9]*\) bytes verified$/\1/p' "$TEST_TMP/readers.out")
[ -n "$bytes" ] && [ "$bytes" -gt 0 ] || fail "the readers verified no bytes: $(cat "$TEST_TMP/readers.out")"
echo "$TEST_NAME: $(cat "$TEST_TMP/readers.out")"
rss=$(awk 'NR == 1 { f = $1 } END { print int(f / 1024) " MiB after 1 s, " int($1 / 1024) " MiB at the end" }' "$TEST_TMP/rss")
echo "$TEST_NAME: $DURATION s, $READERS readers, $written files written ($((added - NFILES)) new)," \
    "$bytes bytes verified, peak RSS $((peak_kib / 1024)) MiB (cache_size $CACHE_MIB MiB; RSS $rss)"
if $sanitized; then
    echo "NOTE: $TEST_NAME: a sanitizer build: the daemon's RSS is not bounded (shadow memory, quarantine); LeakSanitizer found no leak"
    exit 0
fi
limit_kib=$(((CACHE_MIB + BASE_MIB + THREADS * SEARCH_MIB) * 1024))
[ "$peak_kib" -le "$limit_kib" ] ||
    fail "peak RSS $peak_kib KiB, over cache_size + $BASE_MIB MiB + $THREADS x $SEARCH_MIB MiB = $limit_kib KiB (VmRSS, VmHWM each second: $(tr '\n' ' ' < "$TEST_TMP/rss"))"
exit 0
