# Sourced by the mount tests after lib.sh: starting and stopping trajfs
# mounts so that no mount and no daemon outlives a test, whatever way it
# ends. Mount points live in $TEST_TMP. Helpers name their variables
# _like_this (see lib.sh).

TRAJFS=$top_builddir/trajfs
TOOLS=$top_builddir/tests/tools

[ -x "$TRAJFS" ] || fail "$TRAJFS not built"
if [ ! -c /dev/fuse ]; then
    echo "SKIP: $TEST_NAME: /dev/fuse is missing (no FUSE in this kernel or container)"
    exit 77
fi
command -v fusermount3 > /dev/null || fail "fusermount3 not found (apt-get install fuse3)"

# Mount points and daemon PIDs started by this test, for the cleanup;
# SERVERS (e.g. an NFS server exporting a mount) are stopped first, as
# they keep files of the mounts open.
MOUNTED=""
DAEMONS=""
SERVERS=""

is_mounted() {
    # /proc/self/mountinfo, not stat: a hung daemon must not hang the test.
    # A space in a mount point is written \040 there.
    awk -v d="$1" '{ gsub(/\\040/, " ", $5) } $5 == d { found = 1 } END { exit !found }' \
        /proc/self/mountinfo
}

# stop_pid PID: SIGTERM, then SIGKILL after 2 s. The process may go (an
# exited daemon, not our child, is reaped by PID 1 whenever it gets to
# it) between any two of these kills: a kill that finds nothing is fine,
# and must not end the test under set -e.
stop_pid() {
    kill -0 "$1" 2>/dev/null || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    for _ in $(seq 20); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null || true
    return 0
}

mount_cleanup() {
    for _p in $SERVERS; do
        stop_pid "$_p"
    done
    for _d in $MOUNTED; do
        is_mounted "$_d" && { fusermount3 -u "$_d" 2>/dev/null || fusermount3 -uz "$_d" 2>/dev/null; }
    done
    for _p in $DAEMONS; do
        stop_pid "$_p"
    done
    return 0
}
trap 'mount_cleanup; rm -rf "$TEST_TMP"' EXIT
trap 'exit 1' INT TERM HUP

# start_mount ARCHIVE DIR [trajfs options...]: mounts in the foreground
# (so the daemon's PID is known) with its messages in DIR.log; waits until
# the mount is there. Sets DAEMON_PID.
start_mount() {
    _archive=$1 _dir=$2
    shift 2
    mkdir -p "$_dir"
    # A background job of a script starts with SIGINT ignored, and libfuse
    # leaves ignored signals alone: restore it so SIGINT unmounts.
    env --default-signal=INT "$TRAJFS" "$_archive" "$_dir" -f "$@" 2> "$_dir.log" &
    DAEMON_PID=$!
    DAEMONS="$DAEMONS $DAEMON_PID"
    case " $MOUNTED " in
    *" $_dir "*) ;;
    *) MOUNTED="$MOUNTED $_dir" ;;
    esac
    for _ in $(seq 100); do
        is_mounted "$_dir" && return 0
        kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$_dir.log" >&2; fail "trajfs $_archive did not mount"; }
        sleep 0.05
    done
    fail "trajfs $_archive: no mount at $_dir after 5 s"
}

# wait_daemon PID: waits (at most 10 s) for a daemon to exit; returns its
# exit status.
wait_daemon() {
    for _ in $(seq 200); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$1" 2>/dev/null && fail "trajfs (pid $1) still runs 10 s after its unmount"
    _rc=0
    wait "$1" || _rc=$?
    forget_daemon "$1"
    return "$_rc"
}

# forget_daemon PID, forget_server PID: a daemon or server that was
# waited for is not stopped at exit (its PID may belong to another
# process by then).
forget_daemon() {
    DAEMONS=$(pids_but "$1" $DAEMONS)
}
forget_server() {
    SERVERS=$(pids_but "$1" $SERVERS)
}
pids_but() { # pids_but PID LIST...: LIST without PID
    _drop=$1
    shift
    for _p in "$@"; do
        [ "$_p" = "$_drop" ] || printf ' %s' "$_p"
    done
}

# stop_mount DIR: unmounts with fusermount3 -u; the daemon must exit 0.
stop_mount() {
    fusermount3 -u "$1" || fail "fusermount3 -u $1 failed"
    wait_daemon "$DAEMON_PID" || fail "trajfs exited with status $? after fusermount3 -u"
    is_mounted "$1" && fail "$1 still mounted"
    return 0
}

# The number of blobs the daemon said it decoded when it unmounted.
decoded_blobs() {
    sed -n 's/.*unmounted; \([0-9]*\) blobs decoded.*/\1/p' "$1.log"
}

# wait_gone PATTERN: waits (at most 10 s) until no process's command line
# matches PATTERN (for daemons that are not our children).
wait_gone() {
    for _ in $(seq 200); do
        pgrep -f -- "$1" > /dev/null || return 0
        sleep 0.05
    done
    fail "a process matching $1 still runs"
}

# Every regular file and symlink below DIR (relative paths, sorted).
list_files() {
    (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort)
}

# Distinct blobs of an archive.
archive_blobs() {
    "$TRAJPACK" list --blobs "$1" | awk -F'\t' 'NR > 1 { print $1 }' | sort -u | wc -l
}

# generate_run DIR: the trajectory the mount tests read (4 checkpoints of
# a 2-layer model with optimizer state; a few seconds).
generate_run() {
    generate_trajectory "$1" --layers 2 --width 64 --heads 2 --ctx 32 --batch 2 \
        --steps 20 --interval 5 --max-chars 20000 --optimizer
}

# wait_for WHAT COMMAND...: runs COMMAND every 20 ms until it succeeds;
# prints the milliseconds it took. A following mount ($FOLLOW seconds)
# must show what it waits for; the bound, the interval and 10 s more, is
# there only so that a mount that never shows it fails instead of hanging
# (the latency itself is a figure the test prints, not a threshold).
wait_for() {
    _what=$1
    shift
    _start=$(date +%s%N)
    until "$@"; do
        _ms=$((($(date +%s%N) - _start) / 1000000))
        [ "$_ms" -le $((FOLLOW * 1000 + 10000)) ] ||
            fail "$_what: not seen after $_ms ms (follow=$FOLLOW)"
        sleep 0.02
    done
    echo $((($(date +%s%N) - _start) / 1000000))
}

# followed LOG: waits until the follow thread of the daemon whose
# messages are in LOG (mounted with TRAJFS_FOLLOW_TRACE set) has ended a
# look that began after this call: two more than had ended then. What
# the archive held when it was called has been seen.
followed() {
    _looks=$(looks_done "$1")
    wait_for "a look of the follow thread" looks_at_least "$1" $((_looks + 2)) > /dev/null
}
looks_done() { grep -c "follow: look [0-9]* done" "$1" || true; }
looks_at_least() { [ "$(looks_done "$1")" -ge "$2" ]; }

reads() { # reads FILE TEXT: whether FILE holds TEXT
    [ "$(cat "$1" 2> /dev/null)" = "$2" ]
}

# torn_commit ARCHIVE AS SOURCE: appends to ARCHIVE the commit that
# `trajpack add --as AS` of SOURCE writes (made on a copy,
# $TEST_TMP/copy.traj), all but its last 10 bytes: a commit being
# written. finish_commit ARCHIVE appends the rest.
torn_commit() {
    _size=$(file_size "$1")
    cp "$1" "$TEST_TMP/copy.traj"
    "$TRAJPACK" add -q --as "$2" "$TEST_TMP/copy.traj" "$3" || fail "add to the copy failed"
    tail -c +$((_size + 1)) "$TEST_TMP/copy.traj" > "$TEST_TMP/commit"
    head -c $(($(file_size "$TEST_TMP/commit") - 10)) "$TEST_TMP/commit" >> "$1"
}

finish_commit() { # ARCHIVE
    tail -c 10 "$TEST_TMP/commit" >> "$1"
    cmp "$1" "$TEST_TMP/copy.traj" || fail "the hand-made commit differs from the copy's"
}

# no_sanitizer_report LOG...: fails, showing the report, when a daemon's
# messages hold a sanitizer report (a build with --enable-sanitizers).
no_sanitizer_report() {
    for _log in "$@"; do
        if grep -q 'Sanitizer\|runtime error' "$_log"; then
            fail "$_log shows a sanitizer report: $(grep -A 30 -m 1 'Sanitizer\|runtime error' "$_log")"
        fi
    done
}
