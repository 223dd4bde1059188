# What the benchmark scripts share: the programs they run, their
# messages, a work directory with a mount point that every exit unmounts
# and removes, one FUSE daemon at a time, timing and the page cache.
# Source it, then call bench_init NAME.

# The built programs: in BUILDDIR, by default the checkout.
builddir=${BUILDDIR:-$(cd "$(dirname "$0")/.." && pwd)}
TRAJFS=$builddir/trajfs
TRAJPACK=$builddir/trajpack

# The generator of the test data; at its default size, the benchmark corpus.
GENERATOR=$(cd "$(dirname "$0")/.." && pwd)/tests/tools/make_trajectory.py

# bench_corpus DIR: makes the benchmark corpus in DIR, once: a DIR that
# exists is used as it is. make_trajectory.py at its default size with
# --optimizer: 16 checkpoints of a 10.7M-parameter model (bf16) and their
# AdamW state, 1.7 GB, about 7 minutes on 2 cores.
bench_corpus() {
    [ -n "$1" ] || die "name the corpus folder: CORPUS_DIR or TRAJFS_CORPUS (made at first use)"
    [ -d "$1" ] && return 0
    echo "generating the benchmark corpus in $1 (once, about 7 minutes) ..."
    rm -rf "$1.part"
    /usr/bin/python3 "$GENERATOR" --out "$1.part" --optimizer > "$work/corpus.log" 2>&1 ||
        { tail -n 20 "$work/corpus.log" >&2; die "make_trajectory.py failed"; }
    mv "$1.part" "$1"
}

# bench_init NAME: messages say NAME; sets work (a new directory under
# TMPDIR) and mnt (a mount point in it), removed at exit with whatever
# else bench_remove names.
bench_init() {
    bench_name=$1
    work=$(mktemp -d "${TMPDIR:-/tmp}/trajfs-$bench_name.XXXXXX")
    mnt=$work/mnt
    mkdir -p "$mnt"
    daemon=""
    server=""
    bench_remove=""
    trap bench_cleanup EXIT
    trap 'exit 1' INT TERM
}

bench_cleanup() {
    # shellcheck disable=SC2086 # a list of PIDs
    [ -z "${server:-}" ] || kill $server 2> /dev/null || true
    if is_mounted; then
        fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
    fi
    [ -z "$daemon" ] || { kill "$daemon" 2> /dev/null; wait "$daemon" 2> /dev/null; } || true
    # shellcheck disable=SC2086 # a list of paths
    rm -rf "$work" $bench_remove
}

die() {
    echo "$bench_name: $*" >&2
    exit 1
}

is_mounted() {
    awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# mount_daemon COMMAND...: runs COMMAND, a FUSE daemon in the foreground
# mounting at $mnt, its messages in $work/daemon.log; dies when it exits
# or has not mounted after $mount_wait seconds (default 5).
mount_daemon() {
    "$@" 2> "$work/daemon.log" &
    daemon=$!
    for _ in $(seq $((${mount_wait:-5} * 20))); do
        is_mounted && return 0
        kill -0 "$daemon" 2> /dev/null || break
        sleep 0.05
    done
    cat "$work/daemon.log" >&2
    die "$1 did not mount at $mnt"
}

# unmount: unmounts $mnt; returns the daemon's exit status.
unmount() {
    fusermount3 -u "$mnt"
    _status=0
    wait "$daemon" || _status=$?
    daemon=""
    return "$_status"
}

# held_bytes FILE...: the bytes the disk holds for the files (st_blocks
# in its unit): less than their size where retired blobs were given back
# as holes. Sizes in the benchmarks are these.
held_bytes() {
    stat -c '%b %B' "$@" | awk '{ s += $1 * $2 } END { print s + 0 }'
}

# sizes_text FILE: "N bytes (M held on disk)".
sizes_text() {
    echo "$(stat -c %s "$1") bytes ($(held_bytes "$1") held on disk)"
}

now() {
    date +%s.%N
}

# timed COMMAND...: seconds it takes; fails when it fails.
timed() {
    _t0=$(now)
    "$@" || return 1
    echo "$(now) $_t0" | awk '{ printf "%.4f", $1 - $2 }'
}

best() { # SECONDS...: the smallest
    printf '%s\n' "$@" | sort -g | head -1
}

drop_caches() {
    sync
    echo 3 > /proc/sys/vm/drop_caches
}

# stale FILE: FILE is missing, or older than the corpus $corpus.
stale() {
    [ ! -f "$1" ] || [ -n "$(find "$corpus" -newer "$1" | head -1)" ]
}

# bench_cold_init NAME SQUASHFS: bench_init NAME for a script that
# loads files of the corpus $corpus cold, through trajfs and through
# squashfuse: the built programs, the corpus (made at first use), root
# for dropping the page cache, and the squashfs image (bench_squashfs).
bench_cold_init() {
    bench_init "$1"
    [ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
    bench_corpus "$corpus"
    [ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
    bench_squashfs "$2"
}

# bench_squashfs SQUASHFS: the squashfuse baseline of the corpus $corpus
# (`mksquashfs DIR X -comp zstd -Xcompression-level 19 -b 1M`), built
# when stale. Needs squashfuse and mksquashfs.
bench_squashfs() {
    command -v squashfuse > /dev/null && command -v mksquashfs > /dev/null ||
        die "needs squashfuse and mksquashfs (Debian: apt-get install squashfs-tools squashfuse)"
    stale "$1" || return 0
    echo "building $1 (zstd -19, 1 MiB blocks) ..."
    rm -f "$1"
    mksquashfs "$corpus" "$1" -comp zstd -Xcompression-level 19 -b 1M -quiet \
        -no-progress > /dev/null || die "mksquashfs failed"
}

mount_trajfs() { # ARCHIVE
    mount_daemon "$TRAJFS" "$1" "$mnt" -f
}

mount_squashfuse() { # SQUASHFS
    mount_daemon squashfuse -f "$1" "$mnt"
}

read_file() {
    cat "$1" > /dev/null
}

# disk_read PID: bytes the process has read from storage.
disk_read() {
    awk '$1 == "read_bytes:" { print $2 }' "/proc/$1/io"
}

# through_mount PATH MOUNT_FUNCTION IMAGE: "SECONDS BYTES_READ" of a cold
# read of PATH (under the mount point) through a fresh mount of IMAGE.
through_mount() {
    "$2" "$3"
    drop_caches
    _before=$(disk_read "$daemon")
    _t=$(timed read_file "$mnt/$1") || die "reading $1 through $2 failed: $(cat "$work/daemon.log")"
    _read=$(( $(disk_read "$daemon") - _before ))
    unmount || true
    echo "$_t $_read"
}

# serve_archive ARCHIVE: serves ARCHIVE over HTTP from 127.0.0.1
# (lighttpd, stopped at exit) and sets url to it. Needs lighttpd.
serve_archive() {
    mkdir -p "$work/www"
    ln -s "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$work/www/a.traj"
    _port=$(( 20000 + $(od -An -tu2 -N2 /dev/urandom | tr -d ' ') % 30000 ))
    cat > "$work/lighttpd.conf" <<CONF
server.document-root = "$work/www"
server.bind = "127.0.0.1"
server.port = $_port
server.follow-symlink = "enable"
server.errorlog = "$work/lighttpd.err"
CONF
    lighttpd -D -f "$work/lighttpd.conf" &
    server="${server:-} $!"
    url=http://127.0.0.1:$_port/a.traj
    for _ in $(seq 50); do
        curl -s -o /dev/null "$url" -r 0-0 && return 0
        sleep 0.1
    done
    die "lighttpd did not serve $url"
}

# serve_s3: an S3-compatible server (s3rver, which .ci/install-deps
# --tests installs) on 127.0.0.1 with the bucket bench, its objects in
# $work/s3; sets s3_endpoint. Fails when s3rver is not installed.
serve_s3() {
    _s3rver=${S3RVER:-${S3RVER_PREFIX:-/opt/trajfs-test-tools}/node_modules/.bin/s3rver}
    command -v node > /dev/null && [ -x "$_s3rver" ] || return 1
    mkdir -p "$work/s3"
    # Listings cut short need OpenSSL's legacy ciphers there (its tokens).
    NODE_OPTIONS=--openssl-legacy-provider node "$_s3rver" -d "$work/s3" -a 127.0.0.1 -p 0 \
        --configure-bucket bench > "$work/s3rver.log" 2>&1 &
    server="${server:-} $!"
    for _ in $(seq 100); do
        _port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/s3rver.log")
        [ -n "$_port" ] && { s3_endpoint=http://127.0.0.1:$_port; return 0; }
        sleep 0.1
    done
    die "s3rver did not start: $(cat "$work/s3rver.log")"
}

# remote_counts LOG: "REQUESTS BYTES" of the last remote mount or open
# (its messages with TRAJFS_REMOTE_STATS set).
remote_counts() {
    sed -n 's/.*: \([0-9]*\) requests, \([0-9]*\) bytes fetched/\1 \2/p' "$1"
}
