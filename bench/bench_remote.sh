#!/bin/sh
# A remote archive over loopback HTTP (lighttpd on 127.0.0.1) against the
# same archive mounted as a local file, in the same run.
#
#   bench/bench_remote.sh [CORPUS_DIR [ARCHIVE]]
#
# CORPUS_DIR (default $TRAJFS_CORPUS; made at first use, see
# bench_corpus in benchlib.sh) is packed once with
# `trajpack create` into ARCHIVE (default $TMPDIR/trajfs-bench-<name>.traj),
# rebuilt when older than the corpus. Prints, for each of
#
#   open        `trajpack list URL` (opening only)
#   one ckpt    a fresh mount, `cat` of the latest weights file
#   all         a fresh mount, `cat` of every file
#
# the requests and bytes fetched (TRAJFS_REMOTE_STATS) and the seconds,
# beside a fresh mount of the local file with the page cache dropped: its
# seconds and the bytes its daemon read from the disk (read_bytes).
# No disk cache (cache_dir) on the remote side: every fetch is cold.
#
# Then the write half, against s3rver on 127.0.0.1 (when installed):
#
#   add         `trajpack add` of each checkpoint file of the corpus, in
#               step order, to s3://bench/run.traj, to s3://bench/cached.traj
#               with cache_dir (the writer keeps its segments there: the
#               next add reads its reference from the disk) and to a local
#               file, one after the other: seconds each, and the ratios
#               to the local add; then what the server alone costs: an
#               open (`trajpack list`) and `curl -T` of the newest segment
#   push        `trajpack push ARCHIVE s3://bench/pushed.traj` against
#               `curl -T ARCHIVE` (one PUT of the whole file)
#
# s3rver ignores If-None-Match, so the writes run with s3_unconditional=1:
# a writer's check of the store (one request) is not made.
# Figures only, no thresholds. Needs root (drop_caches), lighttpd and the
# built trajfs and trajpack (BUILDDIR, default the checkout).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${TRAJFS_CORPUS:-}}
name=$(basename "$corpus")
archive=${2:-${TMPDIR:-/tmp}/trajfs-bench-$name.traj}

. "$here/bench/benchlib.sh"
bench_init bench_remote
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
bench_corpus "$corpus"
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
command -v lighttpd > /dev/null || die "needs lighttpd (apt-get install lighttpd)"
if [ ! -f "$archive" ] || [ -n "$(find "$corpus" -newer "$archive" -print -quit)" ]; then
    echo "packing $corpus into $archive"
    rm -f "$archive"
    "$TRAJPACK" create -q "$archive" "$corpus" || die "trajpack create failed"
fi
serve_archive "$archive"

export TRAJFS_REMOTE_STATS=1

latest=$(cd "$corpus" && ls | grep -v optim | grep safetensors | sort | tail -1)
files=$(cd "$corpus" && find . -type f | sort)

cat_all() {
    cat "$@" > /dev/null
}

# run LABEL FILE...: cat FILE... through a fresh mount of each, the page
# cache dropped first; prints a line.
run() {
    label=$1
    shift
    drop_caches
    mount_daemon "$TRAJFS" "$archive" "$mnt" -f
    tl=$(cd "$mnt/$name" && timed cat_all "$@") || die "cat through the local mount failed"
    disk=$(awk '/^read_bytes/ { print $2 }' "/proc/$daemon/io")
    unmount || die "the local mount's daemon failed"
    drop_caches
    mount_daemon "$TRAJFS" "$url" "$mnt" -f
    tr=$(cd "$mnt/$name" && timed cat_all "$@") || die "cat through the remote mount failed"
    unmount || die "the remote mount's daemon failed"
    set -- $(remote_counts "$work/daemon.log")
    awk -v l="$label" -v tl="$tl" -v tr="$tr" -v d="$disk" -v q="$1" -v b="$2" \
        -v oq="$open_q" -v ob="$open_b" 'BEGIN {
        printf "%-9s remote %7.3f s  %5d requests  %8.1f MB fetched | local %7.3f s  %8.1f MB read from disk | time x%.2f  bytes x%.3f\n",
            l, tr, q - oq, (b - ob) / 1e6, tl, d / 1e6, tr / tl, (b - ob) / (d > 0 ? d : 1) }'
}

drop_caches
"$TRAJPACK" list "$url" > /dev/null 2> "$work/open.log"
set -- $(remote_counts "$work/open.log")
open_q=$1 open_b=$2
commits=$("$TRAJPACK" stats --json "$archive" 2>/dev/null | grep -o '"commits": *[0-9]*' | grep -o '[0-9]*$' || echo "?")
echo "archive: $archive ($(sizes_text "$archive"), $commits commits), served by lighttpd on 127.0.0.1"
echo "open      $open_q requests, $open_b bytes fetched"
echo "(one ckpt and all: beyond the open's requests and bytes)"
run "one ckpt" "$latest"
# shellcheck disable=SC2086
run "all" $files

# ---- the write half ----
if ! serve_s3; then
    echo "write half: skipped (s3rver is not installed: sh .ci/install-deps --tests)"
    exit 0
fi
unset TRAJFS_REMOTE_STATS
export AWS_ENDPOINT_URL=$s3_endpoint AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=S3RVER \
    AWS_SECRET_ACCESS_KEY=S3RVER TRAJFS_REMOTE_OPTIONS=s3_unconditional=1
written=$work/written.traj
echo "write half: s3rver on 127.0.0.1 (s3_unconditional=1), against a local file on $(df --output=source "$work" | tail -1)"
printf '%-32s %9s %9s %9s %7s %7s\n' "trajpack add of" "s3 s" "cached s" "local s" "s3/l" "cached/l"
verb=create
for f in config.json $(cd "$corpus" && ls | grep safetensors | sort -V); do
    tr=$(timed "$TRAJPACK" $verb -q "s3://bench/run.traj" "$corpus/$f") || die "$verb of $f to s3 failed"
    tc=$(timed env TRAJFS_REMOTE_OPTIONS="$TRAJFS_REMOTE_OPTIONS,cache_dir=$work/wcache" \
        "$TRAJPACK" $verb -q "s3://bench/cached.traj" "$corpus/$f") ||
        die "$verb of $f to s3 with cache_dir failed"
    tl=$(timed "$TRAJPACK" $verb -q "$written" "$corpus/$f") || die "$verb of $f failed"
    verb=add
    printf '%-32s %9.3f %9.3f %9.3f %7.2f %7.2f\n' "$f" "$tr" "$tc" "$tl" \
        "$(echo "$tr $tl" | awk '{ print $1 / $2 }')" "$(echo "$tc $tl" | awk '{ print $1 / $2 }')"
done | tee "$work/adds"
# summary KIND COLUMN: the median, min and max ratio of the adds of KIND
# (weights or optimizer files) in COLUMN.
summary() {
    awk -v k="$1" -v c="$2" '$1 ~ /safetensors/ && (k == "optimizer") == ($1 ~ /optim/) { print $c }' \
        "$work/adds" | sort -g | awk -v k="$1" -v c="$2" '{ r[NR] = $1 } END {
        printf "%-9s %s: median x%.2f (min x%.2f, max x%.2f) of %d adds\n", k,
            c == 5 ? "to s3" : "to s3 with cache_dir", r[int((NR + 1) / 2)], r[1], r[NR], NR }'
}
for kind in weights optimizer; do
    summary $kind 5
    summary $kind 6
done
newest=$(ls "$work/s3/bench/run.traj" | grep '_S3rver_object$' | sort | head -1)
tcurl=$(timed curl -sf -T "$work/s3/bench/run.traj/$newest" "$s3_endpoint/bench/alone" -o /dev/null) ||
    die "curl -T failed"
topen=$(timed sh -c '"$0" list "$1" > /dev/null' "$TRAJPACK" "s3://bench/run.traj") || die "list failed"
echo "the server alone: an open (trajpack list) $topen s; curl -T of the newest segment" \
    "($(stat -c %s "$work/s3/bench/run.traj/$newest") bytes, the last commit) $tcurl s"
# object_bytes KEY: the bytes of the objects of the archive at KEY.
object_bytes() {
    find "$work/s3/bench/$1" -name '*._S3rver_object' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}
echo "in the bucket: $(object_bytes run.traj) bytes of segments; the local file: $(sizes_text "$written")"
tp=$(timed "$TRAJPACK" push -q "$archive" "s3://bench/pushed.traj") || die "push failed"
tc=$(timed curl -sf -T "$archive" "$s3_endpoint/bench/whole.traj" -o /dev/null) || die "curl -T failed"
echo "$tp $tc" | awk -v size="$(sizes_text "$archive")" '{
    printf "push of the archive (%s): %.3f s; curl -T of it: %.3f s (x%.2f)\n", size, $1, $2, $1 / $2 }'
echo "the pushed copy: $(object_bytes pushed.traj) bytes of segments"
"$TRAJPACK" gc -q "s3://bench/run.traj" > /dev/null || die "gc of the archive in the bucket failed"
echo "after trajpack gc of s3://bench/run.traj: $(object_bytes run.traj) bytes"
