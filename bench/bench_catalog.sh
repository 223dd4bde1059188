#!/bin/sh
# Long runs: what opening, listing, reading and appending cost as an
# archive grows to thousands of commits, as a user waits for them.
#
#   bench/bench_catalog.sh [CHECKPOINTS [TENSORS [SMALL]]]
#
# 1. A synthetic archive of CHECKPOINTS (default 10000) checkpoints of
#    TENSORS (default 300) tensors, run/step-N/model.safetensors, one
#    commit each (bench/bench_catalog --keep: a real catalog, shared
#    payloads). On it, each three times (median, min-max), with the peak
#    RSS of the process (/usr/bin/time) or of the mount's daemon (its
#    VmHWM after the step):
#      list        `trajpack list ARCHIVE`
#      list dir    `trajpack list ARCHIVE run/step-N` (one directory)
#      mount, ls, stat, first bytes
#                  a fresh read-only mount: until mounted, `ls` of one
#                  checkpoint's directory, `stat` of its file, the file's
#                  first 512 bytes (O_DIRECT: without readahead into the
#                  synthetic tensors)
#      add         `trajpack add` of one small checkpoint (a new series:
#                  the synthetic tensors do not decode) into a copy
#      list URL    `trajpack list` of the archive served by lighttpd on
#                  127.0.0.1: the requests and bytes fetched
# 2. A real run: SMALL (default 1000) checkpoints of 100 bf16 tensors of
#    4096 elements (bench/make_small_run.py, 819 kB each), `trajpack
#    create --chunk-shift 10` (400 blobs a checkpoint, each file its own
#    durable commit) against `zstd -3` of the same files (one thread,
#    one output file each), then list and `add` of one more checkpoint.
# Figures only, no thresholds. Needs python3 with numpy, zstd and
# lighttpd (the remote row is left out without it).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/benchlib.sh"
bench_init bench_catalog
checkpoints=${1:-10000}
tensors=${2:-300}
small=${3:-1000}
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] && [ -x "$builddir/bench/bench_catalog" ] ||
    die "build trajfs, trajpack and bench/bench_catalog first (or set BUILDDIR)"
command -v zstd > /dev/null || die "needs zstd"
mount_wait=600 # a mount of a long run opens its whole catalog first

# rss_of PID: the peak resident memory of a running process, in MiB.
rss_of() {
    awk '$1 == "VmHWM:" { printf "%.0f", $2 / 1024 }' "/proc/$1/status"
}

# stats FILE: "median s (min-max)" of the seconds in column 1 of FILE and
# the median of column 2, the peak RSS in MiB.
stats() {
    sort -g "$1" | awk '{ t[NR] = $1; r[NR] = $2 } END {
        m = int((NR + 1) / 2)
        printf "%8.3f s (%.3f-%.3f)  %6s MiB", t[m], t[1], t[NR], r[m] }'
}

# row LABEL FILE: a line of the table.
row() {
    printf '%-26s %s\n' "$1" "$(stats "$2")"
}

# quiet COMMAND...: COMMAND, its output dropped (timed prints the time).
quiet() {
    "$@" > /dev/null
}

# timed_rss OUT COMMAND...: appends "SECONDS RSS_MIB" of COMMAND to OUT
# (the peak RSS from /usr/bin/time, whose seconds have two decimals).
timed_rss() {
    _out=$1
    shift
    _t0=$(now)
    /usr/bin/time -f '%M' -o "$work/time" "$@" > /dev/null 2> "$work/err" ||
        { cat "$work/err" >&2; die "$* failed"; }
    echo "$(now) $_t0 $(cat "$work/time")" | awk '{ printf "%.4f %.0f\n", $1 - $2, $3 / 1024 }' >> "$_out"
}

# ---- 1. the synthetic archive -------------------------------------------------

echo "building the synthetic archive ..."
"$builddir/bench/bench_catalog" --keep "$work" "$checkpoints" "$tensors" |
    grep -v '^open + list\|^per checkpoint'
archive=$work/bench_catalog.trajfs
mid=run/step-$((checkpoints / 2 * 100))
"$here/bench/make_small_run.py" "$work/extra" 1 > /dev/null
extra=$work/extra/step-000100.safetensors
echo "(time: median of 3, min-max; RSS: peak of the process, of the daemon after the step)"
for _ in 1 2 3; do
    timed_rss "$work/list" "$TRAJPACK" list "$archive"
    timed_rss "$work/listdir" "$TRAJPACK" list "$archive" "$mid"
    _t0=$(now)
    mount_trajfs "$archive"
    echo "$(now) $_t0 $(rss_of "$daemon")" | awk '{ printf "%.4f %s\n", $1 - $2, $3 }' >> "$work/mount"
    for step in ls stat byte; do
        case $step in
        ls) _t=$(timed quiet ls "$mnt/$mid") ;;
        stat) _t=$(timed quiet stat "$mnt/$mid/model.safetensors") ;;
        byte) _t=$(timed dd if="$mnt/$mid/model.safetensors" of=/dev/null bs=512 count=1 \
            iflag=direct status=none) ;;
        esac
        echo "$_t $(rss_of "$daemon")" >> "$work/$step"
    done
    unmount || die "the daemon failed: $(cat "$work/daemon.log")"
    cp "$archive" "$work/copy.traj"
    sync # else the add's commit would write the copy out
    timed_rss "$work/add" "$TRAJPACK" add -q --as extra/model.safetensors "$work/copy.traj" "$extra"
    rm -f "$work/copy.traj"
done
"$TRAJPACK" stats "$archive" | head -n 1
row "trajpack list" "$work/list"
row "trajpack list one dir" "$work/listdir"
row "mount (until mounted)" "$work/mount"
row "  then ls of one dir" "$work/ls"
row "  then stat of one file" "$work/stat"
row "  then its first bytes" "$work/byte"
row "trajpack add (one ckpt)" "$work/add"

if command -v lighttpd > /dev/null; then
    serve_archive "$archive"
    _t=$(TRAJFS_REMOTE_STATS=1 timed quiet "$TRAJPACK" list "$url" 2> "$work/remote.log") ||
        die "trajpack list $url failed: $(cat "$work/remote.log")"
    remote_counts "$work/remote.log" |
        awk -v t="$_t" '{ printf "%-26s %8.3f s, %d requests, %.1f MB fetched\n", "trajpack list URL", t, $1, $2 / 1e6 }'
else
    echo "trajpack list URL          (no lighttpd: not measured)"
fi

# ---- 2. a real run of small checkpoints ----------------------------------------

echo "writing $((small + 1)) small checkpoints ..."
"$here/bench/make_small_run.py" "$work/run" $((small + 1)) > /dev/null
last=$(ls "$work/run" | tail -n 1)
mkdir "$work/next" "$work/zst"
mv "$work/run/$last" "$work/next/"
files_mb=$(du -sm "$work/run" | cut -f1)
sync
tz=$(timed zstd -3 -q -T1 --output-dir-flat "$work/zst" "$work/run"/*) || die "zstd failed"
sync
tc=$(timed "$TRAJPACK" create -q --chunk-shift 10 "$work/real.traj" "$work/run") || die "trajpack create failed"
echo "real run: $small checkpoints, $files_mb MiB of files; archive $(sizes_text "$work/real.traj"), zstd -3 $(du -sb "$work/zst" | cut -f1) bytes"
awk -v c="$tc" -v z="$tz" 'BEGIN { printf "%-26s %8.3f s, zstd -3 %.3f s: x%.2f\n", "trajpack create", c, z, c / z }'
: > "$work/list" && : > "$work/add"
for _ in 1 2 3; do
    timed_rss "$work/list" "$TRAJPACK" list "$work/real.traj"
    cp "$work/real.traj" "$work/copy.traj"
    sync
    timed_rss "$work/add" "$TRAJPACK" add -q --as "run/$last" "$work/copy.traj" "$work/next/$last"
    rm -f "$work/copy.traj"
done
row "trajpack list" "$work/list"
row "trajpack add (next ckpt)" "$work/add"
