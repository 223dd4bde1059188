#!/bin/sh
# kill -9 while removed checkpoints' space is given back, and during gc:
# nothing kept is ever lost, nothing removed is left partial.
#
# 1. The removal (remove_paths of retentionlib.sh: rm through a writable
#    mount, each rm a commit, then punched payloads and a rebase commit)
#    of every checkpoint but every 4th from a run of 16 with optimizer
#    state, killed with SIGKILL: by turns after the N-th write of the
#    archive (tests/tools/killonwrite; N spread over the writes of an
#    unkilled removal, counted first) and after a delay spread over its
#    time. After each kill: the archive opens, `trajpack verify` passes,
#    every kept file is listed and byte-identical, each file being
#    removed is listed and byte-identical or gone (never partial). Then
#    `trajpack gc`: it holds no more bytes than before and the files are
#    the same. Then the removal is finished unkilled: only the kept files
#    remain, byte-identical. Before each kill by time the kernel stacks
#    of the writer's threads are sampled (a thread in fallocate: a kill
#    while punching; in fsync: in a commit's fdatasync). Printed: where
#    the kills fell, and how many left chunks of kept files as deltas
#    against removed ones (a rebase not done) after gc.
# 2. `trajpack gc`, killed the same ways (counting the writes of the
#    archive's directory): in place, of an archive where a killed removal
#    left chunks to rebase; and `gc --rewrite` (which writes a new file
#    beside it) of the archive after the removal. After each kill the
#    same checks; then gc again, unkilled: fewer or as many bytes held as
#    before the killed one, no temporary file left, the files the same,
#    no chunk left to rebase.
# RETENTION_KILL_TRIALS and RETENTION_GC_KILL_TRIALS set the number of
# kills (defaults 16 and 10).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/retentionlib.sh"
. "$(dirname "$0")/faultlib.sh"

TRIALS=${RETENTION_KILL_TRIALS:-16}
GC_TRIALS=${RETENTION_GC_KILL_TRIALS:-10}

# A killer or a stopped writer (retentionlib.sh: stopped) of a trial
# that failed goes first.
KILLER="" STOPPED_PID=""
trap 'for p in $KILLER $STOPPED_PID; do kill -KILL "$p" 2> /dev/null || true; done
      mount_cleanup; rm -rf "$TEST_TMP"' EXIT

src=$TEST_TMP/src
generate_retention_run "$src/run"
full=$TEST_TMP/full.traj
"$TRAJPACK" create -q "$full" "$src/run" || fail "create failed"
live_files "$full" > "$TEST_TMP/all.list"
i=0
: > "$TEST_TMP/removed"
for s in $(cd "$src/run" && ls step-*.optim.safetensors | sed 's/^step-\([0-9]*\)\..*/\1/'); do
    i=$((i + 1))
    [ $((i % 4)) -eq 0 ] ||
        printf 'run/step-%s.safetensors\nrun/step-%s.optim.safetensors\n' "$s" "$s" >> "$TEST_TMP/removed"
done
grep -vxFf "$TEST_TMP/removed" "$TEST_TMP/all.list" > "$TEST_TMP/kept"
if [ "$(wc -l < "$TEST_TMP/kept")" -ne 9 ] || [ "$(wc -l < "$TEST_TMP/removed")" -ne 24 ]; then
    fail "the run has other files than 16 checkpoints and config.json"
fi

# check_after ARCHIVE WHAT: opens, verifies, lists every kept file and
# nothing but kept files and files being removed, and each listed file
# extracts byte-identical to its source. Sets nremoved.
check_after() {
    live_files "$1" > "$TEST_TMP/listed"
    "$TRAJPACK" verify -q "$1" > "$TEST_TMP/verify" 2> "$TEST_TMP/err" ||
        fail "$2: verify failed: $(cat "$TEST_TMP/err")"
    if grep -vxFf "$TEST_TMP/listed" "$TEST_TMP/kept" > "$TEST_TMP/missing"; then
        fail "$2: kept files not listed: $(cat "$TEST_TMP/missing")"
    fi
    if grep -vxFf "$TEST_TMP/all.list" "$TEST_TMP/listed" > "$TEST_TMP/other"; then
        fail "$2: lists files never added: $(cat "$TEST_TMP/other")"
    fi
    extract_all "$1" "$TEST_TMP/out"
    while IFS= read -r _p; do
        cmp "$TEST_TMP/out/$_p" "$src/$_p" || fail "$2: $_p is not whole"
    done < "$TEST_TMP/listed"
    [ "$(find "$TEST_TMP/out" -type f | wc -l)" -eq "$(wc -l < "$TEST_TMP/listed")" ] ||
        fail "$2: extract wrote other files than those listed"
    bytes_checked=$((bytes_checked + $(find "$TEST_TMP/out" -type f -printf '%s\n' |
        awk '{ s += $1 } END { print s + 0 }')))
    nremoved=$((24 - $(grep -cxFf "$TEST_TMP/removed" "$TEST_TMP/listed" || true)))
}

# Spread over 0..SPAN-1 (or 0..SPAN seconds), trial by trial: TRIAL of
# TRIALS, with a seed.
spread_int() { # TRIAL TRIALS SPAN SEED
    awk -v t="$1" -v n="$2" -v s="$3" -v seed="$4" 'BEGIN { srand(seed + t)
        printf "%d", (t - 1 + rand()) * s / n }'
}
spread_s() { # TRIAL TRIALS SECONDS SEED
    awk -v t="$1" -v n="$2" -v s="$3" -v seed="$4" 'BEGIN { srand(seed + t)
        printf "%.3f", (t - 1 + rand()) * s / n }'
}

# start_killer FILE PID SKIP: killonwrite in the background (KILLER),
# watching once this returns.
start_killer() {
    "$KILLONWRITE" "$1" "$2" "$3" 60000 > "$TEST_TMP/killer.out" &
    KILLER=$!
    until [ -s "$TEST_TMP/killer.out" ]; do
        kill -0 "$KILLER" 2> /dev/null || fail "killonwrite did not start"
        sleep 0.01
    done
}
# stop_killer: stops it; KILLER_SEEN is the writes it saw. (Not for a
# command substitution: its subshell cannot wait for the killer, and would
# read the count before the killer wrote it.)
stop_killer() {
    kill "$KILLER" 2> /dev/null || true
    wait "$KILLER" 2> /dev/null || true
    KILLER_SEEN=$(sed -n 's/^\([0-9]*\) writes seen$/\1/p' "$TEST_TMP/killer.out")
}

# sample_stacks PID: the kernel stacks of its threads (root only).
sample_stacks() {
    cat "/proc/$1"/task/*/stack > "$TEST_TMP/stacks" 2> /dev/null || true
}

archive=$TEST_TMP/a.traj

# ---- 1. kills during the removal ------------------------------------------------------

# An unkilled removal: its writes and its time.
cp "$full" "$archive"
# shellcheck disable=SC2046 # archive paths have no spaces
removal_prepare "$archive" $(cat "$TEST_TMP/removed")
start_killer "$archive" "$WRITER_PID" 1000000000
start=$(date +%s%N)
removal_go
removal_wait || fail "the unkilled removal failed: $(cat "$TEST_TMP/removal.err" 2> /dev/null)"
span=$(($(date +%s%N) - start))
stop_killer
writes=$KILLER_SEEN
[ "${writes:-0}" -gt 0 ] || fail "killonwrite saw no write of the unkilled removal: $(cat "$TEST_TMP/killer.out")"
if [ "$REMOVE_WITH" = mount ]; then
    stop_mount "$RM_MNT"
    quiet_daemon "$RM_MNT.log"
else
    wait "$WRITER_PID" 2> /dev/null || true
fi
check_after "$archive" "the unkilled removal"
[ "$nremoved" -eq 24 ] || fail "the unkilled removal left $((24 - nremoved)) files"
cp "$archive" "$TEST_TMP/removed.traj" # for part 2
echo "$TEST_NAME: an unkilled removal: $writes writes of the archive (as inotify counts them) in $((span / 1000000)) ms"

after=0 first=0 last=0 torn=0 punching=0 syncing=0 pending_kill=0 pending_gc=0 pending_end=0 stacks_seen=false
partway=0
trial=0
while [ "$trial" -lt "$TRIALS" ]; do
    trial=$((trial + 1))
    cp "$full" "$archive"
    # shellcheck disable=SC2046
    removal_prepare "$archive" $(cat "$TEST_TMP/removed")
    : > "$TEST_TMP/stacks"
    if [ $((trial % 2)) -eq 1 ]; then
        skip=$(spread_int $(((trial + 1) / 2)) $(((TRIALS + 1) / 2)) "$writes" 17)
        what="removal, trial $trial (kill at write $((skip + 1)) of $writes)"
        start_killer "$archive" "$WRITER_PID" "$skip"
        removal_go
        killed_after=false
        if removal_wait; then
            # Done before the killer saw its write (inotify merges writes
            # it has not read yet): killed after.
            stop_killer
            kill -KILL "$WRITER_PID" 2> /dev/null || true
            after=$((after + 1))
            killed_after=true
        else
            wait "$KILLER" 2> /dev/null || true
        fi
    else
        delay=$(spread_s $((trial / 2)) $((TRIALS / 2)) "$(echo "$span" | awk '{ print $1 / 1e9 }')" 23)
        what="removal, trial $trial (kill after $delay s)"
        removal_go
        sleep "$delay"
        sample_stacks "$WRITER_PID"
        kill -KILL "$WRITER_PID" 2> /dev/null || true
        killed_after=false
        removal_wait && killed_after=true && after=$((after + 1))
    fi
    removal_reap
    [ -s "$TEST_TMP/stacks" ] && stacks_seen=true
    grep -q 'fallocate\|punch' "$TEST_TMP/stacks" && punching=$((punching + 1))
    grep -q 'fsync' "$TEST_TMP/stacks" && syncing=$((syncing + 1))

    check_after "$archive" "$what"
    grep -q 'after the last commit are ignored' "$TEST_TMP/verify" && torn=$((torn + 1))
    [ "$nremoved" -gt 0 ] && [ "$nremoved" -lt 24 ] && partway=$((partway + 1))
    [ "$nremoved" -eq 0 ] && first=$((first + 1))
    [ "$nremoved" -eq 24 ] && ! $killed_after && last=$((last + 1))
    if [ "$(pending_rebases "$archive")" -ne 0 ]; then
        pending_kill=$((pending_kill + 1))
        [ -e "$TEST_TMP/pending.traj" ] || cp "$archive" "$TEST_TMP/pending.traj" # for part 2
    fi

    # gc gives back what the kill left in use.
    before=$(held "$archive")
    "$TRAJPACK" gc -q "$archive" > "$TEST_TMP/gc.out" 2>&1 || fail "$what: gc failed: $(cat "$TEST_TMP/gc.out")"
    [ "$(held "$archive")" -le "$before" ] ||
        fail "$what: gc: $(held "$archive") bytes held, $before before"
    cp "$TEST_TMP/listed" "$TEST_TMP/listed.before"
    check_after "$archive" "$what, then gc"
    cmp -s "$TEST_TMP/listed" "$TEST_TMP/listed.before" || fail "$what: gc changed the files listed"
    [ "$(pending_rebases "$archive")" -eq 0 ] || pending_gc=$((pending_gc + 1))

    # The rest of the removal, unkilled.
    grep -xFf "$TEST_TMP/removed" "$TEST_TMP/listed" > "$TEST_TMP/left" || true
    if [ -s "$TEST_TMP/left" ]; then
        # shellcheck disable=SC2046
        remove_paths "$archive" $(cat "$TEST_TMP/left")
    fi
    check_after "$archive" "$what, then the rest removed"
    [ "$nremoved" -eq 24 ] || fail "$what: the rest of the removal left $((24 - nremoved)) files"
    [ "$(pending_rebases "$archive")" -eq 0 ] || pending_end=$((pending_end + 1))
done
echo "$TEST_NAME: $TRIALS kills of the removal: $first before its first removal was durable," \
    "$partway part of the way through it, $last after its last removal was durable, $after after it; $torn left a torn commit; $punching killed in fallocate, $syncing in fsync" \
    "(of $((TRIALS / 2)) stacks sampled)"
$stacks_seen || echo "NOTE: $TEST_NAME: no kernel stacks readable: kills while punching not counted"
echo "$TEST_NAME: chunks of kept files left deltas against removed ones (a rebase not done):" \
    "after $pending_kill kills; $pending_gc still after gc; $pending_end after the rest was removed"
# (With trajpack rm, one commit for all, no kill falls part of the way.)
[ $((partway + last)) -gt 0 ] || fail "no kill fell inside the removal"

# ---- 2. kills during gc ---------------------------------------------------------------

gcdir=$TEST_TMP/gc
mkdir "$gcdir"
garchive=$gcdir/a.traj

# gc_kills SOURCE [--rewrite]: an unkilled gc of a copy of SOURCE counts
# its writes (of the archive's directory) and its time; then
# GC_TRIALS/2 gcs of fresh copies are killed the two ways of part 1.
gc_kills() {
    _source=$1
    shift
    _opts="${*:+$* }" # for messages
    cp "$_source" "$garchive"
    stopped "$TRAJPACK" gc -q "$@" "$garchive"
    gc_pid=$STOPPED_PID
    start_killer "$gcdir" "$gc_pid" 1000000000
    start=$(date +%s%N)
    kill -CONT "$gc_pid"
    wait "$gc_pid" || fail "the unkilled gc ${_opts}failed: $(cat "$TEST_TMP/stopped.out")"
    gc_span=$(($(date +%s%N) - start))
    stop_killer
    gc_writes=$KILLER_SEEN
    [ "${gc_writes:-0}" -gt 0 ] || fail "killonwrite saw no write of the unkilled gc $_opts"
    check_after "$garchive" "the unkilled gc $_opts"
    [ "$(pending_rebases "$garchive")" -eq 0 ] || fail "the unkilled gc ${_opts}left chunks to rebase"
    cp "$TEST_TMP/listed" "$TEST_TMP/gc.listed" # gc changes no file
    echo "$TEST_NAME: an unkilled gc ${_opts}of $(basename "$_source"): $gc_writes writes in its directory in $((gc_span / 1000000)) ms"

    replaced=0 leftover=0 gc_after=0
    trial=0
    while [ "$trial" -lt $((GC_TRIALS / 2)) ]; do
        trial=$((trial + 1))
        rm -f "$gcdir"/*
        cp "$_source" "$garchive"
        before=$(held "$garchive")
        ino=$(stat -c %i "$garchive")
        stopped "$TRAJPACK" gc -q "$@" "$garchive"
        gc_pid=$STOPPED_PID
        if [ $((trial % 2)) -eq 1 ]; then
            skip=$(spread_int $(((trial + 1) / 2)) $(((GC_TRIALS / 2 + 1) / 2)) "$gc_writes" 31)
            what="gc ${_opts}of $(basename "$_source"), trial $trial (kill at write $((skip + 1)) of $gc_writes)"
            start_killer "$gcdir" "$gc_pid" "$skip"
            kill -CONT "$gc_pid"
            if wait "$gc_pid" 2> /dev/null; then
                stop_killer
                gc_after=$((gc_after + 1))
            else
                wait "$KILLER" 2> /dev/null || true
            fi
        else
            delay=$(spread_s $((trial / 2)) $((GC_TRIALS / 4)) "$(echo "$gc_span" | awk '{ print $1 / 1e9 }')" 37)
            what="gc ${_opts}of $(basename "$_source"), trial $trial (kill after $delay s)"
            kill -CONT "$gc_pid"
            sleep "$delay"
            kill -KILL "$gc_pid" 2> /dev/null || true
            wait "$gc_pid" 2> /dev/null || true
        fi
        flock -w 10 "$garchive" true || fail "$what: the archive's lock is still held 10 s after the kill"
        [ "$(stat -c %i "$garchive")" = "$ino" ] || replaced=$((replaced + 1))
        [ "$(find "$gcdir" -mindepth 1 ! -name a.traj | wc -l)" -eq 0 ] || leftover=$((leftover + 1))
        check_after "$garchive" "$what"
        cmp -s "$TEST_TMP/listed" "$TEST_TMP/gc.listed" || fail "$what: changed the files listed"
        "$TRAJPACK" gc -q "$@" "$garchive" > "$TEST_TMP/gc.out" 2>&1 ||
            fail "$what: the next gc failed: $(cat "$TEST_TMP/gc.out")"
        [ "$(held "$garchive")" -le "$before" ] ||
            fail "$what: the next gc: $(held "$garchive") bytes held, $before before the killed one"
        [ "$(ls "$gcdir")" = a.traj ] || fail "$what: the next gc left $(ls "$gcdir" | tr '\n' ' ')"
        check_after "$garchive" "$what, then gc"
        [ "$(pending_rebases "$garchive")" -eq 0 ] || fail "$what: the next gc left chunks to rebase"
    done
    echo "$TEST_NAME: $((GC_TRIALS / 2)) kills of gc ${_opts}of $(basename "$_source"): $replaced after the archive was replaced," \
        "$leftover left a temporary file (the next gc removed it), $gc_after after gc ended"
}

# In place, where a killed removal left chunks to rebase (part 1 kept the
# first such archive; every run has some: the rebase commit is most of
# a removal's writes).
[ -e "$TEST_TMP/pending.traj" ] || fail "no kill of part 1 left chunks to rebase"
gc_kills "$TEST_TMP/pending.traj"
# A whole rewrite, of the archive after the removal.
gc_kills "$TEST_TMP/removed.traj" --rewrite
echo "$TEST_NAME: $bytes_checked bytes compared with their sources"
exit 0
