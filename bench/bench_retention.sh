#!/bin/sh
# Retention: what removing checkpoints from an archive gives back, and
# what the removal costs, on the benchmark corpus (16 checkpoints, bf16
# weights and fp32 AdamW state, step 25 to 400).
#
#   bench/bench_retention.sh [CORPUS_DIR]
#
# CORPUS_DIR defaults to $CORPUS_DIR, then $TRAJFS_CORPUS (made at first
# use: bench_corpus in benchlib.sh). Scenarios, the N-th checkpoint
# counted from the oldest (step 25) in step order:
#   keep-last-4   keep the newest 4 checkpoints (325..400)
#   every-4th     keep every 4th (100, 200, 300, 400)
#   every-8th     keep every 8th (200, 400)
#   optim-last-2  keep every weights file, and the optimizer state of the
#                 newest 2 only (375, 400)
#   drop-middle   remove one middle checkpoint (step 200, both files)
# config.json is kept in all. For each: `trajpack create` of the whole
# corpus (made once, copied with its holes and synced for each
# scenario), the removal of the others, oldest first, as `rm` of a glob
# goes (remove_files below: one `trajpack rm`, or with BENCH_REMOVE=mount
# `rm` of each through a writable mount; a removal's commit punches what
# nothing needs any more, then the chunks that referenced what it
# removed are rebased), then `trajpack gc` (in place: what is left to
# rebase and punch), then gc again (nothing left). Printed:
#   space  the bytes the disk holds (st_blocks) after the removal and
#          after gc, against a fresh `trajpack create` of exactly the
#          kept files (hard links under the same relative paths), ratio
#   kind   of the same archives, the stored bytes of live tensors by
#          kind (`trajpack stats --json`: BF16 = weights, F32 =
#          optimizer state), after the removal against the fresh archive;
#          and a weights-only variant: the same removals in an archive of
#          the 16 weights files, its held bytes against a fresh one
#   cost   bytes written to storage by the removal (/proc/PID/io
#          write_bytes of trajpack, or of the mount's daemon, read before
#          the unmount) and by gc, against the bytes the
#          whole archive holds; the removal's time (mount, rm, unmount)
#          and gc's against `trajpack create` of the kept files (medians:
#          create of 3 runs, the removal of 3, or of 1 where its first
#          run took more than 10 s; BENCH_REPEAT=N runs every removal N
#          times)
# Figures only, no thresholds; about 5 minutes on 2 cores. Needs FUSE,
# the built trajfs and trajpack (BUILDDIR, default the checkout) and
# 5 GB in TMPDIR for the work files.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${CORPUS_DIR:-${TRAJFS_CORPUS:-}}}

. "$here/bench/benchlib.sh"
bench_init bench_retention
[ -x "$TRAJFS" ] && [ -x "$TRAJPACK" ] || die "build trajfs and trajpack first (or set BUILDDIR)"
bench_corpus "$corpus"
corpus=$(cd "$corpus" && pwd)
repeat=${BENCH_REPEAT:-3}
# shellcheck disable=SC2034 # read by mount_daemon (benchlib.sh)
mount_wait=60
top=$(basename "$corpus") # archive paths are $top/FILE

# ---- the removal --------------------------------------------------------------

# remove_files ARCHIVE PATH...: removes the archive's files PATH... and
# lets the archive give their space back; sets `written`, the bytes its
# writer wrote to storage. BENCH_REMOVE chooses how: "rm" (the default),
# one `trajpack rm` of them all (one commit, one rebase); "mount", `rm`
# of each through a writable mount, as a trainer removes its old
# checkpoints (each its own commit and rebase).
remove_files() {
    case ${BENCH_REMOVE:-rm} in
    rm) written=$(written_by "$TRAJPACK" rm -q "$@") || die "trajpack rm failed" ;;
    mount) remove_through_mount "$@" ;;
    *) die "BENCH_REMOVE=$BENCH_REMOVE: rm or mount" ;;
    esac
}

remove_through_mount() {
    _archive=$1
    shift
    mount_daemon "$TRAJFS" "$_archive" "$mnt" -f -o rw
    for _p; do
        rm "$mnt/$_p" || die "rm $_p through the mount failed: $(cat "$work/daemon.log")"
    done
    written=$(io_written "$daemon")
    unmount || die "trajfs exited with status $?: $(cat "$work/daemon.log")"
}

io_written() { # PID: bytes the process has written to storage
    awk '$1 == "write_bytes:" { print $2 }' "/proc/$1/io"
}

# written_by COMMAND...: runs COMMAND (its output to stderr), prints the
# bytes it wrote to storage: those of a shell that reaped it.
written_by() {
    sh -c '"$@" >&2 || exit 1; awk '\''$1 == "write_bytes:" { print $2 }'\'' /proc/$$/io' \
        written_by "$@"
}

# ---- the scenarios --------------------------------------------------------------

# The checkpoints' steps in order; the files of the corpus.
(cd "$corpus" && ls) > "$work/files"
sed -n 's/^step-0*\([0-9][0-9]*\)\.safetensors$/\1/p' "$work/files" | sort -n > "$work/steps"
nsteps=$(wc -l < "$work/steps")
[ "$nsteps" -ge 8 ] || die "$corpus has $nsteps checkpoints (step-N.safetensors), expected 16"

# keeps SCENARIO FILE: whether the scenario keeps FILE (of the corpus).
keeps() {
    _step=$(echo "$2" | sed -n 's/^step-0*\([0-9][0-9]*\)\..*/\1/p')
    [ -n "$_step" ] || return 0
    _i=$(grep -nx "$_step" "$work/steps" | cut -d: -f1) # 1 = the oldest
    case $1 in
    keep-last-4) [ "$_i" -gt $((nsteps - 4)) ] ;;
    every-4th) [ $((_i % 4)) -eq 0 ] ;;
    every-8th) [ $((_i % 8)) -eq 0 ] ;;
    optim-last-2)
        case $2 in
        *.optim.safetensors) [ "$_i" -gt $((nsteps - 2)) ] ;;
        *) true ;;
        esac ;;
    drop-middle) [ "$_i" -ne $((nsteps / 2)) ] ;;
    *) die "no scenario $1" ;;
    esac
}

# split SCENARIO FILES: writes $work/S.kept and $work/S.removed (names of
# the corpus, a subset of FILES).
split() {
    : > "$work/$1.kept"
    : > "$work/$1.removed"
    while IFS= read -r _f; do
        if keeps "$1" "$_f"; then
            echo "$_f" >> "$work/$1.kept"
        else
            echo "$_f" >> "$work/$1.removed"
        fi
    done < "$2"
}

# tree DIR LIST: DIR/$top/ with the files of LIST (hard links to the
# corpus, copies where it is on another file system).
tree() {
    mkdir -p "$1/$top"
    while IFS= read -r _f; do
        ln "$corpus/$_f" "$1/$top/$_f" 2> /dev/null || cp -p "$corpus/$_f" "$1/$top/$_f"
    done < "$2"
}

# create_tree ARCHIVE DIR: `trajpack create` of DIR/$top, paths $top/...;
# prints the seconds.
create_tree() {
    rm -f "$1"
    _t0=$(now)
    (cd "$2" && "$TRAJPACK" create -q "$1" "$top") || die "trajpack create of $2 failed"
    sync "$1"
    echo "$(now) $_t0" | awk '{ printf "%.3f", $1 - $2 }'
}

median() { # SECONDS...
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# stored ARCHIVE DTYPE: stored bytes of the live tensors of DTYPE.
stored() {
    "$TRAJPACK" stats --json "$1" | tr '{' '\n' |
        sed -n "s/.*\"dtype\": \"$2\", \"weights\": [0-9]*, \"stored_bytes\": \([0-9]*\).*/\1/p" |
        head -n 1 | awk '{ print $1 + 0 }'
}

# copy_of ARCHIVE COPY: a copy with the same holes, synced: the commits
# of the removal do not write it out.
copy_of() {
    cp --sparse=always "$1" "$2"
    sync "$2"
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? a / b : 0 }'; }

# ---- the archives -------------------------------------------------------------------

find "$corpus" -type f -exec cat {} + > /dev/null # in the page cache for every method
echo "corpus $corpus: $(wc -l < "$work/files") files, $nsteps checkpoints," \
    "$(mb "$(find "$corpus" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')") MB, $(nproc) CPUs"

mkdir "$work/all"
tree "$work/all" "$work/files"
t=$(create_tree "$work/full.traj" "$work/all")
full_held=$(held_bytes "$work/full.traj")
echo "the whole corpus: trajpack create $t s, $(mb "$full_held") MB held ($(mb "$(stat -c %s "$work/full.traj")") MB file)"

grep -v '\.optim\.safetensors$' "$work/files" > "$work/weights"
mkdir "$work/w"
tree "$work/w" "$work/weights"
t=$(create_tree "$work/wfull.traj" "$work/w")
wfull_held=$(held_bytes "$work/wfull.traj")
echo "its weights (and config.json): trajpack create $t s, $(mb "$wfull_held") MB held"
rm -rf "$work/all" "$work/w"

scenarios="keep-last-4 every-4th every-8th optim-last-2 drop-middle"

# ---- each scenario ------------------------------------------------------------------------

for s in $scenarios; do
    echo "$s ..." >&2
    split "$s" "$work/files"
    sed "s|^|$top/|" "$work/$s.removed" > "$work/$s.paths"

    # The fresh archive of the kept files, 3 times.
    mkdir "$work/keep"
    tree "$work/keep" "$work/$s.kept"
    times=""
    for _ in 1 2 3; do
        times="$times $(create_tree "$work/fresh.traj" "$work/keep")"
    done
    # shellcheck disable=SC2086
    fresh_s=$(median $times)
    fresh_held=$(held_bytes "$work/fresh.traj")
    fresh_w=$(stored "$work/fresh.traj" BF16)
    fresh_o=$(stored "$work/fresh.traj" F32)
    rm -rf "$work/keep" "$work/fresh.traj"

    # The removal, then gc.
    rm_times="" rm_written="" runs=0
    while [ "$runs" -lt "$repeat" ]; do
        copy_of "$work/full.traj" "$work/s.traj"
        t0=$(now)
        # shellcheck disable=SC2046
        remove_files "$work/s.traj" $(cat "$work/$s.paths")
        t=$(echo "$(now) $t0" | awk '{ printf "%.3f", $1 - $2 }')
        rm_times="$rm_times $t"
        rm_written="$rm_written $written"
        runs=$((runs + 1))
        # A removal of more than 10 s is run once unless BENCH_REPEAT says.
        if [ "$runs" = 1 ] && [ -z "${BENCH_REPEAT:-}" ] &&
            awk -v t="$t" 'BEGIN { exit !(t > 10) }'; then
            break
        fi
    done
    # shellcheck disable=SC2086
    rm_s=$(median $rm_times)
    # shellcheck disable=SC2086
    rm_w=$(median $rm_written)
    after_held=$(held_bytes "$work/s.traj")
    after_w=$(stored "$work/s.traj" BF16)
    after_o=$(stored "$work/s.traj" F32)
    "$TRAJPACK" list "$work/s.traj" | grep -v '/$' | LC_ALL=C sort > "$work/listed"
    sed "s|^|$top/|" "$work/$s.kept" | LC_ALL=C sort | cmp -s - "$work/listed" ||
        die "$s: the archive lists other files than the kept ones"
    t0=$(now)
    gc_w=$(written_by "$TRAJPACK" gc -q "$work/s.traj" 2> "$work/gc.out") ||
        die "trajpack gc failed: $(cat "$work/gc.out")"
    gc_s=$(echo "$(now) $t0" | awk '{ printf "%.3f", $1 - $2 }')
    gc_held=$(held_bytes "$work/s.traj")
    # gc with nothing left to collect: what it writes.
    gc2_w=$(written_by "$TRAJPACK" gc -q "$work/s.traj" 2> "$work/gc.out") ||
        die "the second trajpack gc failed: $(cat "$work/gc.out")"
    [ "$(held_bytes "$work/s.traj")" -le "$gc_held" ] || die "$s: a second gc made the archive larger"
    echo "$s $(wc -l < "$work/$s.kept") $(wc -l < "$work/$s.removed") $after_held $gc_held $fresh_held" \
        >> "$work/space"
    echo "$s $after_w $fresh_w $after_o $fresh_o" >> "$work/kind"
    echo "$s $rm_w $gc_w $gc2_w $rm_s $runs $gc_s $fresh_s" >> "$work/cost"
    rm -f "$work/s.traj"

    # The weights-only variant, where the scenario removes weights.
    grep -v '\.optim\.safetensors$' "$work/$s.removed" | sed "s|^|$top/|" > "$work/$s.wpaths" || true
    if [ -s "$work/$s.wpaths" ]; then
        grep -v '\.optim\.safetensors$' "$work/$s.kept" > "$work/$s.wkept"
        mkdir "$work/keep"
        tree "$work/keep" "$work/$s.wkept"
        create_tree "$work/fresh.traj" "$work/keep" > /dev/null
        wfresh_held=$(held_bytes "$work/fresh.traj")
        rm -rf "$work/keep" "$work/fresh.traj"
        copy_of "$work/wfull.traj" "$work/s.traj"
        # shellcheck disable=SC2046
        remove_files "$work/s.traj" $(cat "$work/$s.wpaths")
        wafter_held=$(held_bytes "$work/s.traj")
        echo "$s $written $wafter_held $wfresh_held" >> "$work/wonly"
        rm -f "$work/s.traj"
    fi
done

# ---- the tables ---------------------------------------------------------------------------

echo
echo "space: bytes the disk holds, MB (ratio: against the fresh archive of the kept files)"
printf '%-13s %5s %7s %11s %9s %9s %9s %8s\n' scenario kept removed "after rm" "after gc" fresh "rm/fresh" "gc/fresh"
while read -r s k r a g f; do
    printf '%-13s %5s %7s %11s %9s %9s %9s %8s\n' "$s" "$k" "$r" "$(mb "$a")" "$(mb "$g")" "$(mb "$f")" \
        "$(ratio "$a" "$f")" "$(ratio "$g" "$f")"
done < "$work/space"
echo "(before: $(mb "$full_held") MB held by the archive of all files)"

echo
echo "kind: stored bytes of live tensors after rm against the fresh archive, MB (trajpack stats)"
printf '%-13s %9s %9s %7s %11s %9s %7s\n' scenario weights fresh ratio optimizer fresh ratio
while read -r s aw fw ao fo; do
    printf '%-13s %9s %9s %7s %11s %9s %7s\n' "$s" "$(mb "$aw")" "$(mb "$fw")" "$(ratio "$aw" "$fw")" \
        "$(mb "$ao")" "$(mb "$fo")" "$(ratio "$ao" "$fo")"
done < "$work/kind"
echo
echo "weights only: an archive of the 16 weights files ($(mb "$wfull_held") MB held), the same removals"
printf '%-13s %11s %9s %9s %11s\n' scenario "after rm" fresh ratio "rm written"
while read -r s w a f; do
    printf '%-13s %11s %9s %9s %11s\n' "$s" "$(mb "$a")" "$(mb "$f")" "$(ratio "$a" "$f")" "$(mb "$w")"
done < "$work/wonly"

echo
echo "cost: bytes written (MB; x: of the $(mb "$full_held") MB the archive holds) and seconds" \
    "(medians: the removal of its runs, create of 3)"
printf '%-13s %9s %6s %9s %6s %8s %11s %6s %8s %9s\n' scenario "rm wrote" x "gc wrote" x "gc again" "rm s (runs)" "gc s" "create s" "rm+gc/cr"
while read -r s rw gw g2 rs n gs cs; do
    printf '%-13s %9s %6s %9s %6s %8s %7.1f (%s) %6.1f %8.1f %9.1f\n' "$s" "$(mb "$rw")" "$(ratio "$rw" "$full_held")" \
        "$(mb "$gw")" "$(ratio "$gw" "$full_held")" "$(mb "$g2")" "$rs" "$n" "$gs" "$cs" \
        "$(awk -v a="$rs" -v b="$gs" -v c="$cs" 'BEGIN { print (a + b) / c }')"
done < "$work/cost"
echo "(gc again: a second gc, with nothing left to collect)"
