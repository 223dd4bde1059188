# Sourced by the retention tests (tests/shell/retention*.sh) after
# lib.sh and mountlib.sh: removing files from an archive, which gives
# their space back, in one place; the run they thin out; checks.
# Helpers name their variables _like_this (see lib.sh).

# How files are removed: "mount", rm through a writable mount (each rm
# one commit, then a rebase of the chunks that referenced what it
# removed), or "trajpack", `trajpack rm ARCHIVE PATH...`. The one line
# to change once trajpack rm exists (RETENTION_REMOVE_WITH chooses too):
REMOVE_WITH=${RETENTION_REMOVE_WITH:-mount}

# remove_paths ARCHIVE PATH...: removes the archive's files PATH...
# (archive paths); their space comes back.
remove_paths() {
    case $REMOVE_WITH in
    mount) remove_through_mount "$@" ;;
    trajpack)
        "$TRAJPACK" rm "$@" > "$TEST_TMP/rm.out" 2>&1 ||
            fail "trajpack rm $*: $(cat "$TEST_TMP/rm.out")" ;;
    *) fail "REMOVE_WITH=$REMOVE_WITH: mount or trajpack" ;;
    esac
}

# The writable mount the removals go through, and its messages.
RM_MNT=$TEST_TMP/rm.mnt

remove_through_mount() {
    _rm_archive=$1
    shift
    start_mount "$_rm_archive" "$RM_MNT" -o rw
    for _p; do
        rm "$RM_MNT/$_p" || fail "rm $_p through the mount failed: $(cat "$RM_MNT.log")"
    done
    stop_mount "$RM_MNT"
    quiet_daemon "$RM_MNT.log"
}

# A removal to be killed, in two steps: removal_prepare ARCHIVE PATH...
# sets WRITER_PID, the process that will write the archive, before it
# writes; removal_go starts the removal in the background (REMOVAL_JOB,
# whose status removal_wait returns). After a kill, removal_reap unmounts
# what is left.
removal_prepare() {
    _rm_archive=$1
    shift
    printf '%s\n' "$@" > "$TEST_TMP/removal.paths"
    case $REMOVE_WITH in
    mount)
        start_mount "$_rm_archive" "$RM_MNT" -o rw
        WRITER_PID=$DAEMON_PID ;;
    trajpack)
        stopped "$TRAJPACK" rm "$_rm_archive" "$@"
        WRITER_PID=$STOPPED_PID ;;
    *) fail "REMOVE_WITH=$REMOVE_WITH: mount or trajpack" ;;
    esac
}
removal_go() {
    case $REMOVE_WITH in
    mount)
        # (rm of a path the kill left unanswered fails: the job stops.)
        while IFS= read -r _p; do
            rm "$RM_MNT/$_p" || exit 1
        done < "$TEST_TMP/removal.paths" 2> "$TEST_TMP/removal.err" &
        REMOVAL_JOB=$! ;;
    trajpack)
        kill -CONT "$WRITER_PID"
        REMOVAL_JOB=$WRITER_PID ;;
    esac
}
removal_wait() {
    _rc=0
    wait "$REMOVAL_JOB" 2> /dev/null || _rc=$?
    return "$_rc"
}
removal_reap() {
    if [ "$REMOVE_WITH" = mount ]; then
        wait "$WRITER_PID" 2> /dev/null || true
        forget_daemon "$WRITER_PID"
        if is_mounted "$RM_MNT"; then
            fusermount3 -u "$RM_MNT" 2> /dev/null || fusermount3 -uz "$RM_MNT" ||
                fail "cannot unmount $RM_MNT"
        fi
    fi
}

# stopped COMMAND...: starts COMMAND in the background stopped (SIGSTOP
# before it execs, so it has its PID and has written nothing), its
# output in $TEST_TMP/stopped.out: sets STOPPED_PID; kill -CONT starts it.
stopped() {
    sh -c 'kill -STOP $$; exec "$@"' stopped "$@" > "$TEST_TMP/stopped.out" 2>&1 &
    STOPPED_PID=$!
    until [ "$(awk '{ print $3 }' "/proc/$STOPPED_PID/stat" 2> /dev/null)" = T ]; do
        kill -0 "$STOPPED_PID" 2> /dev/null || fail "$1 exited before it was stopped"
        sleep 0.01
    done
}

# quiet_daemon LOG: a daemon's messages hold nothing but its unmount
# line (no error, no space left in use, no sanitizer report).
quiet_daemon() {
    if grep -v 'unmounted; [0-9]* blobs decoded' "$1" > "$TEST_TMP/said"; then
        fail "the daemon said: $(head -n 5 "$TEST_TMP/said")"
    fi
}

# generate_retention_run DIR: 16 checkpoints of a 2-layer model with
# optimizer state, steps 10 to 160 (DIR/step-000NNN.safetensors and
# .optim.safetensors, config.json; about 3 s).
generate_retention_run() {
    generate_trajectory "$1" --layers 2 --width 64 --heads 2 --ctx 32 --steps 160 --interval 10 \
        --optimizer
}

# held FILE: the bytes the disk holds for FILE.
held() {
    sync "$1"
    stat -c '%b %B' "$1" | awk '{ print $1 * $2 }'
}

# live_files ARCHIVE: the files it lists (no directories), sorted.
live_files() {
    "$TRAJPACK" list "$1" > "$TEST_TMP/live.list" 2> "$TEST_TMP/err" ||
        fail "list of $1 failed: $(cat "$TEST_TMP/err")"
    grep -v '/$' "$TEST_TMP/live.list" | LC_ALL=C sort
}

# extract_all ARCHIVE DIR: every file of the archive into DIR (new).
extract_all() {
    rm -rf "$2"
    mkdir -p "$2"
    "$TRAJPACK" extract -q "$1" -C "$2" 2> "$TEST_TMP/err" ||
        fail "extract of $1 failed: $(cat "$TEST_TMP/err")"
}

# pending_rebases ARCHIVE: how many chunks of live files are deltas
# against a blob that no live file has as a chunk (what a rebase would
# re-encode; trajpack list --blobs names no file for such a blob).
pending_rebases() {
    "$TRAJPACK" list --blobs "$1" | awk -F '\t' '
        NR == 1 { next }
        { path[$1] = $8; if ($8 != "-" && $6 != "-") ref[$1] = $6 }
        END { n = 0; for (b in ref) if (path[ref[b]] == "-") n++; print n }'
}
