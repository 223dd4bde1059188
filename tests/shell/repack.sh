#!/bin/sh
# `trajpack repack`, and the allocated bytes that list -l and stats show.
#
# 1. Repack to --max-chain 1 and back to the default: every file
#    extracts byte-identical with its mode and time (directories and a
#    symbolic link too), verify passes, the longest reference chain that
#    stats shows follows the setting, and the result is byte for byte the
#    archive `trajpack create` with the same settings makes of the files
#    (--chunk-shift too).
# 2. Refused: a remote archive, an archive with damaged stored bytes (left
#    as it was), and an archive another writer has (its lock held by
#    flock(1)); a second writer during a repack (stopped while it writes
#    its temporary file) gets a clear busy error, and the repack then
#    completes.
# 3. kill -9 at random moments of repacks (every KILL_AIM-th at the 1st to
#    8th write in the archive's directory, tests/tools/killonwrite): the
#    archive opens, verifies and extracts every file byte-identical. The
#    next repack removes the temporary file a killed one left.
# 4. stats and list -l show the allocated bytes of stat(2) (st_blocks),
#    also of an archive with a hole (a torn tail of zeros that takes no
#    disk).
# REPACK_TRIALS sets the number of kills (default 24).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/faultlib.sh"

TRIALS=${REPACK_TRIALS:-24}

# A repack running in the background when the test ends is stopped first:
# it writes in $TEST_TMP.
background=""
trap '[ -z "$background" ] || kill -9 "$background" 2> /dev/null || true; rm -rf "$TEST_TMP"' EXIT
trap 'exit 1' INT TERM HUP

traj=$TEST_TMP/traj
generate_trajectory "$traj" --layers 1 --width 32 --heads 2 --ctx 16 --batch 2 \
    --steps 12 --interval 2 --max-chars 20000 --dtype bf16,fp32 --optimizer
chmod 0600 "$traj/config.json"
touch -d @1600000000.25 "$traj/config.json"
ln -s bf16/step-000002.safetensors "$traj/latest"
touch -h -d @1600000001 "$traj/latest"
chmod 0750 "$traj/fp32"
touch -d @1600000002 "$traj/fp32"

archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$traj" || fail "create failed"

# longest_chain ARCHIVE: the longest reference chain stats shows.
longest_chain() {
    "$TRAJPACK" stats "$1" > "$TEST_TMP/stats" || fail "stats of $1 failed"
    sed -n 's/^reference chains: longest \([0-9]*\), .*/\1/p' "$TEST_TMP/stats"
}

# same_files ARCHIVE WHAT: verify passes, and the archive extracts to the
# files of $traj with their modes and times.
same_files() {
    "$TRAJPACK" verify -q "$1" > /dev/null 2> "$TEST_TMP/err" ||
        fail "$2: verify failed: $(cat "$TEST_TMP/err")"
    rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
    "$TRAJPACK" extract -q "$1" -C "$TEST_TMP/out" || fail "$2: extract failed"
    assert_same_tree "$traj" "$TEST_TMP/out/traj"
}

# ---- 1. to --max-chain 1 and back ------------------------------------------------

# Six checkpoints a run: room for chains of 2 and more at the default.
chain_default=$(longest_chain "$archive")
[ "$chain_default" -ge 2 ] || fail "the default archive's longest chain is $chain_default"
"$TRAJPACK" repack -q --max-chain 1 "$archive" > "$TEST_TMP/out.txt" 2> "$TEST_TMP/err" ||
    fail "repack --max-chain 1 failed: $(cat "$TEST_TMP/err")"
grep -qE '^repack: 19 files, .* -> .* \(allocated .* -> .*\)$' "$TEST_TMP/out.txt" ||
    fail "repack said: $(cat "$TEST_TMP/out.txt")"
[ "$(longest_chain "$archive")" -eq 1 ] ||
    fail "after repack --max-chain 1 the longest chain is $(longest_chain "$archive")"
same_files "$archive" "repack --max-chain 1"
"$TRAJPACK" create -q --max-chain 1 "$TEST_TMP/created.traj" "$traj" || fail "create failed"
cmp -s "$archive" "$TEST_TMP/created.traj" ||
    fail "repack --max-chain 1 stores other bytes than create --max-chain 1"
"$TRAJPACK" repack -q "$archive" > /dev/null || fail "repack to the default failed"
[ "$(longest_chain "$archive")" -eq "$chain_default" ] ||
    fail "after repack to the default the longest chain is $(longest_chain "$archive")"
same_files "$archive" "repack to the default"
ls "$archive".* 2> /dev/null && fail "repack left a temporary file"
# Another chunk size: the same files in other chunks; and back, the
# archive create makes with the defaults.
"$TRAJPACK" repack -q --chunk-shift 10 "$archive" > /dev/null || fail "repack --chunk-shift failed"
"$TRAJPACK" stats "$archive" | grep -q 'chunks of 2^10 elements' ||
    fail "repack --chunk-shift 10 did not change the chunk size"
same_files "$archive" "repack --chunk-shift 10"
"$TRAJPACK" repack -q --chunk-shift 20 "$archive" > /dev/null || fail "repack --chunk-shift 20 failed"
"$TRAJPACK" create -q "$TEST_TMP/created.traj.2" "$traj" || fail "create failed"
cmp -s "$archive" "$TEST_TMP/created.traj.2" ||
    fail "repack to the defaults stores other bytes than create with the defaults"

# ---- 2. refused ----------------------------------------------------------------

status=0
"$TRAJPACK" repack -q http://127.0.0.1:9/a.traj > /dev/null 2> "$TEST_TMP/err" || status=$?
[ "$status" -eq 1 ] || fail "repack of a URL: status $status, expected 1"
grep -q 'a remote archive' "$TEST_TMP/err" || fail "repack of a URL said: $(cat "$TEST_TMP/err")"
status=0
"$TRAJPACK" repack -q --max-chain 5000 "$archive" > /dev/null 2> "$TEST_TMP/err" || status=$?
[ "$status" -eq 2 ] || fail "repack --max-chain 5000: status $status, expected 2"

# Damaged stored bytes stop the repack (status 1, a message naming the
# file), and the archive stays as it was: a rewrite does not pass damage
# on.
cp "$archive" "$TEST_TMP/damaged.traj"
damage_blob "$TEST_TMP/damaged.traj" > /dev/null
rewrite_refused repack "$TEST_TMP/damaged.traj" \
    "cannot read traj/.*checksum mismatch (stored bytes are damaged)"

# flock(1) holds the lock a writer takes.
rewrite_refused repack "$archive" "another writer" flock "$archive"

# A writer while a repack writes its temporary file (the repack stopped
# there: then it holds the lock for sure). A repack that ended before it
# was stopped is tried again.
echo note > "$TEST_TMP/note.txt"
busy_seen=false
for attempt in 1 2 3 4 5 6 7 8; do
    "$TRAJPACK" repack -q -T 1 --search "$archive" > /dev/null 2> "$TEST_TMP/repack.err" &
    repacker=$!
    background=$repacker
    while kill -0 "$repacker" 2> /dev/null && [ ! -e "$archive.repack-tmp" ]; do
        sleep 0.01
    done
    kill -STOP "$repacker" 2> /dev/null || true
    if [ -e "$archive.repack-tmp" ] && kill -0 "$repacker" 2> /dev/null; then
        status=0
        "$TRAJPACK" add -q "$archive" "$TEST_TMP/note.txt" 2> "$TEST_TMP/err" || status=$?
        kill -CONT "$repacker"
        [ "$status" -eq 1 ] || fail "add during a repack: status $status, expected 1"
        grep -q 'another writer' "$TEST_TMP/err" || fail "add during a repack said: $(cat "$TEST_TMP/err")"
        busy_seen=true
    fi
    kill -CONT "$repacker" 2> /dev/null || true
    wait "$repacker" || fail "the repack beside a second writer failed: $(cat "$TEST_TMP/repack.err")"
    background=""
    ! $busy_seen || break
done
$busy_seen || fail "no repack was caught writing in 8 attempts"
same_files "$archive" "repack beside a second writer"
"$TRAJPACK" list "$archive" | grep -q note.txt && fail "the refused add stored its file"

# ---- 3. kill -9 ------------------------------------------------------------------

"$TRAJPACK" list "$archive" > "$TEST_TMP/all"
start=$(date +%s%N)
"$TRAJPACK" repack -q "$archive" > /dev/null || fail "repack failed"
per_repack=$(( $(date +%s%N) - start )) # ns
awk -v n="$TRIALS" -v span="$per_repack" \
    'BEGIN { srand(11); for (i = 0; i < n; i++) printf "%.4f\n", rand() * 1.2 * span / 1e9 }' \
    > "$TEST_TMP/delays"
killed=0 trial=0 leftover=0
while IFS= read -r delay; do
    trial=$((trial + 1))
    skip=$(kill_skip "$trial")
    chain=$((trial % 2 + 1)) # 1 and 2 in turn: every repack changes the archive
    setsid "$TRAJPACK" repack -q --max-chain "$chain" "$archive" > /dev/null 2> "$TEST_TMP/repack.err" &
    group=$!
    background=-$group
    reap_kill "$group" "$TEST_TMP" "$skip" "$delay" "$archive" "trial $trial"
    background=""
    status=$reaped
    case $status in
    0) ;;
    137) killed=$((killed + 1)) ;;
    *) fail "trial $trial: a repack failed without being killed: $(cat "$TEST_TMP/repack.err")" ;;
    esac
    [ ! -e "$archive.repack-tmp" ] || leftover=$((leftover + 1))
    check_archive "$archive" "$TEST_TMP/all" "$traj" "traj/" "trial $trial (max-chain $chain)"
done < "$TEST_TMP/delays"
[ "$trial" -eq "$TRIALS" ] || fail "ran $trial trials, not $TRIALS"
[ "$killed" -ge $((TRIALS / 4)) ] || fail "only $killed of $TRIALS kills hit a running repack"
"$TRAJPACK" repack -q "$archive" > /dev/null || fail "repack after the kills failed"
ls "$archive".* 2> /dev/null && fail "repack did not remove the temporary file a killed one left"
same_files "$archive" "repack after the kills"
echo "repack: $TRIALS kills ($aimed_kills timed by writes, $killed during repacks, $leftover left a temporary file; a repack takes $((per_repack / 1000000)) ms), $bytes_checked bytes compared"

# ---- 4. allocated bytes ------------------------------------------------------------

# human BYTES: the size as trajpack prints it (cli/size.c).
human() {
    awk -v b="$1" 'BEGIN {
        if (b < 1000) { printf "%d B\n", b; exit }
        split("kB MB GB TB PB EB", u, " ")
        v = b / 1000; k = 1
        while (v >= 999.95 && k < 6) { v /= 1000; k++ }
        printf "%.1f %s\n", v, u[k]
    }'
}
allocated_of() {
    echo $(( $(stat -c '%b' "$1") * $(stat -c '%B' "$1") ))
}
# assert_allocated ARCHIVE: stats, stats --json and list -l show what stat says.
assert_allocated() {
    want=$(allocated_of "$1")
    "$TRAJPACK" stats --json "$1" > "$TEST_TMP/stats.json" || fail "stats --json of $1 failed"
    got=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["allocated_bytes"])' \
        "$TEST_TMP/stats.json")
    [ "$got" = "$want" ] || fail "$1: stats --json says $got allocated bytes, stat $want"
    "$TRAJPACK" stats "$1" | head -n 1 | grep -qF "($(human "$want") allocated)" ||
        fail "$1: stats does not show $(human "$want") allocated: $("$TRAJPACK" stats "$1" | head -n 1)"
    "$TRAJPACK" list -l "$1" | tail -n 1 |
        grep -qE "^total: .*; archive [^(]* \($(human "$want") allocated\) in [0-9]+ commits$" ||
        fail "$1: list -l does not show $(human "$want") allocated: $("$TRAJPACK" list -l "$1" | tail -n 1)"
}
assert_allocated "$archive"
# A hole: 8 MB of torn tail that takes no disk (a sparse file's).
cp "$archive" "$TEST_TMP/sparse.traj"
truncate -s +8M "$TEST_TMP/sparse.traj"
[ "$(allocated_of "$TEST_TMP/sparse.traj")" -lt "$(file_size "$TEST_TMP/sparse.traj")" ] ||
    fail "the file system made no hole"
assert_allocated "$TEST_TMP/sparse.traj"
exit 0
