#!/bin/sh
# Size and cold-load latency by chain setting, against release 1 and
# squashfuse: the figures of issue #23's targets, one table.
#
#   bench/bench_ratio.sh [CORPUS_DIR [SQUASHFS]]
#
# CORPUS_DIR (default $TRAJFS_CORPUS; made at first use, see bench_corpus
# in benchlib.sh) is the benchmark trajectory: step-N.safetensors (bf16
# weights) and step-N.optim.safetensors (float32 AdamW state). For each
# setting of BENCH_SETTINGS (default "default 1 2 4 4096": the writer's
# default, then --max-chain N), in turn, two archives are made in the
# work directory (and removed before the next setting):
#
#   weights   `trajpack create` of the bf16 checkpoints alone (the
#             step-*.safetensors that are not *.optim.*), in step order
#   corpus    `trajpack create` of CORPUS_DIR
#
# Their bytes, apparent (the file's size) and allocated (st_blocks * 512:
# less where retired blobs were given back as holes), are set against
# release 1's archives of the same files: 157,394,608 and 1,271,526,706
# bytes for the corpus these were measured on. The generator's floating
# point differs between machines, so a corpus made elsewhere differs a
# little: with BENCH_R1_TRAJPACK (a trajpack of release 1) the script
# packs this corpus with it first and uses what its disk holds. Then, BENCH_REPEAT times (default 5), a cold load of the
# weights and of the optimizer file of each step of BENCH_STEPS (default
# "400 200 25": the newest, the middle, the first) through a fresh trajfs
# mount of the corpus archive and, right after it, through a fresh
# squashfuse mount of SQUASHFS (default $TMPDIR/trajfs-bench-<name>.sqfs,
# zstd -19, built when older than the corpus), the page cache dropped
# before each read. Each cell is trajfs's time over squashfuse's of the
# same run: the median of the runs and their spread (lowest-highest); a
# last row gives squashfuse's seconds and the squashfs image's bytes.
# Prints figures, no thresholds.
#
# Quick (a few minutes): BENCH_SETTINGS="default 4096" BENCH_REPEAT=1.
# Needs root (drop_caches), squashfuse and mksquashfs, and the built
# trajfs and trajpack (BUILDDIR, default the checkout).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${TRAJFS_CORPUS:-}}
name=$(basename "$corpus")
squashfs=${2:-${TMPDIR:-/tmp}/trajfs-bench-$name.sqfs}
settings=${BENCH_SETTINGS:-default 1 2 4 4096}
repeat=${BENCH_REPEAT:-5}
steps=${BENCH_STEPS:-400 200 25}

# Release 1, nearest references (each tensor against the same tensor of
# the previous checkpoint, one keyframe).
R1_WEIGHTS=157394608
R1_CORPUS=1271526706
r1_trajpack=${BENCH_R1_TRAJPACK:-}

. "$here/bench/benchlib.sh"
bench_cold_init bench_ratio "$squashfs"

weights=$(cd "$corpus" && find . -maxdepth 1 -name 'step-*.safetensors' ! -name '*.optim.*' |
          sed 's|^\./||' | sort -V)
[ -n "$weights" ] || die "$corpus holds no step-*.safetensors"
files="" # the loaded files, weights and optimizer state of each step
for s in $steps; do
    for f in $(printf 'step-%06d.safetensors step-%06d.optim.safetensors' "$s" "$s"); do
        [ -f "$corpus/$f" ] || die "$corpus has no $f (BENCH_STEPS)"
        files="$files $f"
    done
done

# median_spread FORMAT VALUES...: "MEDIAN (LOW-HIGH)" of the values, each
# printed with the printf FORMAT.
median_spread() {
    _fmt=$1
    shift
    printf '%s\n' "$@" | sort -g | awk -v f="$_fmt" '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf f " (" f "-" f ")", m, v[1], v[NR]
    }'
}

# label FILE: "400 weights", "400 optim".
label() {
    case $1 in
    *.optim.*) echo "$(echo "$1" | sed 's/^step-0*\([0-9]*\).*/\1/') optim" ;;
    *) echo "$(echo "$1" | sed 's/^step-0*\([0-9]*\).*/\1/') weights" ;;
    esac
}

ratio() { # A B: A / B
    echo "$1 $2" | awk '{ printf "%.4f", $1 / $2 }'
}

# sizes FILE BASELINE: "APPARENT ALLOCATED APPARENT/BASELINE ALLOCATED/BASELINE".
sizes() {
    _a=$(stat -c %s "$1") _b=$(held_bytes "$1")
    echo "$_a $_b $(ratio "$_a" "$2") $(ratio "$_b" "$2")"
}

# pack SETTING ARCHIVE PATH...: `trajpack create` with the setting.
pack() {
    _opt=""
    [ "$1" = default ] || _opt="--max-chain $1"
    _archive=$2
    shift 2
    # shellcheck disable=SC2086 # an option and its value, split on purpose
    "$TRAJPACK" create -q $_opt "$_archive" "$@" || die "trajpack create $_opt failed"
}

if [ -n "$r1_trajpack" ]; then
    echo "release 1 ($r1_trajpack): packing ..."
    # shellcheck disable=SC2046 # the file names, split on purpose
    "$r1_trajpack" create -q "$work/r1-weights.traj" $(for w in $weights; do echo "$corpus/$w"; done) ||
        die "$r1_trajpack create failed"
    "$r1_trajpack" create -q "$work/r1-corpus.traj" "$corpus" || die "$r1_trajpack create failed"
    R1_WEIGHTS=$(held_bytes "$work/r1-weights.traj") R1_CORPUS=$(held_bytes "$work/r1-corpus.traj")
    rm -f "$work/r1-weights.traj" "$work/r1-corpus.traj"
fi

table=$work/table
{
    printf '%-8s %12s %12s %7s %7s %14s %14s %7s %7s' setting "weights B" allocated "x r1" \
        "alloc" "corpus B" allocated "x r1" alloc
    for f in $files; do
        printf '  %-22s' "$(label "$f")"
    done
    echo
} > "$table"
sq_times=$work/squashfuse # "FILE SECONDS" of every squashfuse run
: > "$sq_times"

for setting in $settings; do
    echo "$setting: packing ..."
    wa=$work/weights-$setting.traj ca=$work/corpus-$setting.traj
    # shellcheck disable=SC2086 # the file names, split on purpose
    pack "$setting" "$wa" $(for w in $weights; do echo "$corpus/$w"; done)
    pack "$setting" "$ca" "$corpus"
    set -- $(sizes "$wa" "$R1_WEIGHTS") $(sizes "$ca" "$R1_CORPUS")
    row=$(printf '%-8s %12s %12s %7.4f %7.4f %14s %14s %7.4f %7.4f' "$setting" "$@")
    rm -f "$wa"
    for f in $files; do
        echo "$setting: cold loads of $f ..."
        r=""
        for _ in $(seq "$repeat"); do
            set -- $(through_mount "$name/$f" mount_trajfs "$ca")
            t=$1
            set -- $(through_mount "$f" mount_squashfuse "$squashfs")
            r="$r $(ratio "$t" "$1")"
            echo "$f $1" >> "$sq_times"
        done
        # shellcheck disable=SC2086 # the runs' ratios
        row="$row  $(printf '%-22s' "$(median_spread %.2f $r)")"
    done
    rm -f "$ca"
    echo "$row" >> "$table"
done

echo
echo "corpus $corpus ($(echo "$weights" | wc -l) bf16 checkpoints); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bytes: apparent and allocated, and x release 1 ($R1_WEIGHTS B weights, $R1_CORPUS B corpus)"
echo "cold loads (step, file): trajfs / squashfuse (zstd -19) seconds through fresh mounts, page cache"
echo "dropped: median (lowest-highest) of $repeat runs, and squashfuse's own seconds"
echo
cat "$table"
row=$(printf '%-8s %12s %12s %7s %7s %14s %14s %7s %7s' "squashfs" "" "" "" "" \
      "$(stat -c %s "$squashfs")" "$(held_bytes "$squashfs")" "" "")
for f in $files; do
    # shellcheck disable=SC2046 # the runs' seconds
    row="$row  $(printf '%-22s' "$(median_spread %.3f $(awk -v f="$f" '$1 == f { print $2 }' "$sq_times")) s")"
done
echo "$row"
