#!/bin/sh
# trajpack rm and prune: files, directories and whole checkpoints leave an
# archive in one commit, and their space comes back.
#   rm removes files, a directory only with -r; a PATH not in the
#     archive (without -f), a directory without -r, or the root refuse the
#     whole removal and leave the archive byte-identical.
#   prune keeps --keep-last N of each run, --keep-every K'th step, the
#     checkpoints with a file matching --keep, and of the others removes
#     all files or, with --drop, those matching it; steps in natural order
#     (checkpoint-2 before checkpoint-10), each run on its own; checkpoint
#     directories left empty go; files without a step stay; no rule, or
#     rules that leave a run nothing, are refused.
#   --dry-run leaves the archive byte-identical and lists exactly what the
#     prune then removes.
# After each change every kept file extracts byte-identical to its
# original, trajpack verify passes, and removing a middle checkpoint
# lowers the archive's allocated bytes.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/layoutlib.sh"

# Eight checkpoints (steps 2 to 16) of a tiny model, bf16 and fp32 weights
# and AdamW state: traj/{bf16,fp32}/step-0000NN.safetensors,
# traj/step-0000NN.optim.safetensors, traj/config.json.
generate_trajectory "$TEST_TMP/traj" --layers 1 --width 32 --heads 2 --ctx 16 --batch 2 \
    --steps 16 --interval 2 --max-chars 20000 --dtype bf16,fp32 --optimizer

# The trees packed, each into its own archive, all below $src:
#   flat     the trajectory as written: three runs (bf16/step-#, fp32/step-#,
#            step-#.optim), zero-padded steps, and config.json
#   sharded  checkpoint-N/ with 3 weight shards, their index and
#            optimizer.safetensors (make_layouts.py; N not padded)
#   trainer  checkpoint-N/ as the transformers Trainer writes it:
#            model.safetensors, optimizer.pt (torch.save), scheduler.pt,
#            rng_state.pth, trainer_state.json (make_torch_files.py)
#   nat      step-N.safetensors, N not padded, and config.json
#   runs     run1/step-N.safetensors (N = 2 to 16) and run2/step-N (2 to 8)
src=$TEST_TMP/src
mkdir "$src"
cp -r "$TEST_TMP/traj" "$src/flat"
"$PYTHON" "$MAKE_LAYOUTS" sharded "$src/sharded" "$TEST_TMP/traj" || fail "make_layouts.py sharded failed"
"$PYTHON" "$MAKE_TORCH_FILES" trainer "$src/trainer" "$TEST_TMP/traj" ||
    fail "make_torch_files.py trainer failed"
mkdir -p "$src/nat" "$src/runs/run1" "$src/runs/run2"
cp "$TEST_TMP/traj/config.json" "$src/nat/"
for n in 2 4 6 8 10 12 14 16; do
    padded=$(printf '%06d' "$n")
    cp "$TEST_TMP/traj/bf16/step-$padded.safetensors" "$src/nat/step-$n.safetensors"
    cp "$TEST_TMP/traj/bf16/step-$padded.safetensors" "$src/runs/run1/step-$n.safetensors"
    [ "$n" -le 8 ] && cp "$TEST_TMP/traj/fp32/step-$padded.safetensors" "$src/runs/run2/step-$n.safetensors"
done

# pack NAME: a fresh archive $TEST_TMP/NAME.traj of $src/NAME (archive
# paths NAME/...); prints its path.
pack() {
    rm -f "$TEST_TMP/$1.traj"
    "$TRAJPACK" create -q "$TEST_TMP/$1.traj" "$src/$1" || fail "create $1 failed"
    echo "$TEST_TMP/$1.traj"
}

# files ARCHIVE: its files (no directories), sorted.
files() {
    "$TRAJPACK" list "$1" > "$TEST_TMP/list.raw" || fail "list $1 failed"
    grep -v '/$' "$TEST_TMP/list.raw" | LC_ALL=C sort
}

# dirs ARCHIVE: its directories, sorted, each with its trailing '/'.
dirs() {
    "$TRAJPACK" list "$1" > "$TEST_TMP/list.raw" || fail "list $1 failed"
    grep '/$' "$TEST_TMP/list.raw" | LC_ALL=C sort
}

# source_files NAME [GREP_OPTIONS PATTERN]: the files of $src/NAME as
# archive paths, sorted, with those grep -E PATTERN selects (or, with -v,
# leaves out).
source_files() {
    _name=$1
    shift
    (cd "$src" && find "$_name" -type f) | LC_ALL=C sort > "$TEST_TMP/source.list"
    if [ $# -gt 0 ]; then
        grep -E "$@" "$TEST_TMP/source.list" || true
    else
        cat "$TEST_TMP/source.list"
    fi
}

# expect ARCHIVE EXPECTED_FILE WHAT: the archive's files are those listed.
expect() {
    files "$1" > "$TEST_TMP/got"
    cmp -s "$2" "$TEST_TMP/got" || { diff "$2" "$TEST_TMP/got" >&2; fail "$3: other files kept"; }
}

# intact ARCHIVE: verify passes, and extract gives exactly the archive's
# files, each byte-identical to its original below $src.
intact() {
    "$TRAJPACK" verify -q "$1" > /dev/null || fail "verify $1 failed"
    rm -rf "$TEST_TMP/out"
    mkdir "$TEST_TMP/out"
    "$TRAJPACK" extract -q "$1" -C "$TEST_TMP/out" || fail "extract $1 failed"
    files "$1" > "$TEST_TMP/intact.list"
    (cd "$TEST_TMP/out" && find . ! -type d | sed 's|^\./||' | LC_ALL=C sort) > "$TEST_TMP/extracted"
    cmp -s "$TEST_TMP/intact.list" "$TEST_TMP/extracted" || fail "extract of $1 gave other files"
    while IFS= read -r _p; do
        cmp -s "$src/$_p" "$TEST_TMP/out/$_p" || fail "$_p of $1 differs from its original"
    done < "$TEST_TMP/intact.list"
}

allocated() {
    echo $(($(stat -c %b "$1") * 512))
}

# refused STATUS PATTERN ARCHIVE ARGS...: `trajpack ARGS...` exits with
# STATUS, says something grep PATTERN matches, and leaves ARCHIVE as it
# was.
refused() {
    _want=$1 _pattern=$2 _archive=$3
    shift 3
    cp "$_archive" "$TEST_TMP/refused.before"
    _status=0
    "$TRAJPACK" "$@" > "$TEST_TMP/stdout" 2> "$TEST_TMP/stderr" || _status=$?
    [ "$_status" -eq "$_want" ] || fail "trajpack $*: status $_status, expected $_want"
    grep -q -- "$_pattern" "$TEST_TMP/stderr" || fail "trajpack $* said: $(cat "$TEST_TMP/stderr")"
    cmp -s "$_archive" "$TEST_TMP/refused.before" || fail "the refused trajpack $* changed $_archive"
}

# pruned ARCHIVE ARGS...: trajpack prune --dry-run ARGS... changes nothing
# and lists exactly the files (and directories) that trajpack prune
# ARGS... then removes; the kept files are intact.
pruned() {
    _archive=$1
    shift
    cp "$_archive" "$TEST_TMP/dry.before"
    files "$_archive" > "$TEST_TMP/files.before"
    dirs "$_archive" > "$TEST_TMP/dirs.before"
    "$TRAJPACK" prune --dry-run "$_archive" "$@" > "$TEST_TMP/dry" || fail "prune --dry-run $* failed"
    cmp -s "$_archive" "$TEST_TMP/dry.before" || fail "prune --dry-run $* changed the archive"
    tail -n 1 "$TEST_TMP/dry" | grep -q '^prune: would remove .* frees .* now .* once .* re-encoded$' ||
        fail "prune --dry-run $* ended with: $(tail -n 1 "$TEST_TMP/dry")"
    "$TRAJPACK" prune "$_archive" "$@" > "$TEST_TMP/real" || fail "prune $* failed"
    tail -n 1 "$TEST_TMP/real" | grep -q '^prune: removed .*; allocated .* -> ' ||
        fail "prune $* ended with: $(tail -n 1 "$TEST_TMP/real")"
    sed '$d' "$TEST_TMP/dry" > "$TEST_TMP/dry.list"
    sed '$d' "$TEST_TMP/real" > "$TEST_TMP/real.list"
    cmp -s "$TEST_TMP/dry.list" "$TEST_TMP/real.list" || fail "prune $* listed other paths than its dry run"
    files "$_archive" | LC_ALL=C comm -23 "$TEST_TMP/files.before" - > "$TEST_TMP/gone"
    dirs "$_archive" | LC_ALL=C comm -23 "$TEST_TMP/dirs.before" - >> "$TEST_TMP/gone"
    LC_ALL=C sort "$TEST_TMP/dry.list" > "$TEST_TMP/dry.sorted"
    LC_ALL=C sort "$TEST_TMP/gone" > "$TEST_TMP/gone.sorted"
    cmp -s "$TEST_TMP/dry.sorted" "$TEST_TMP/gone.sorted" ||
        { diff "$TEST_TMP/dry.sorted" "$TEST_TMP/gone.sorted" >&2; fail "prune --dry-run $* listed other paths than went"; }
    intact "$_archive"
}

# ---- rm ----

a=$(pack flat)
intact "$a"
refused 1 'flat/bf16: is a directory' "$a" rm "$a" flat/bf16
refused 1 'flat/nope: no such file or directory' "$a" rm "$a" flat/nope
# One refused PATH refuses them all.
refused 1 'flat/nope: no such file' "$a" rm "$a" flat/config.json flat/nope
refused 1 "root" "$a" rm -r "$a" /
refused 1 '\.\.' "$a" rm "$a" flat/../flat/config.json
refused 2 'expected an ARCHIVE' "$a" rm "$a"

# A file; a directory with -r (a trailing '/' allowed, a path below it
# given too); -f passes over what is not there.
# (On a terminal, where a rebase's progress bar is drawn without -q:
# script(1) gives rm a pseudo-terminal, and prints all it shows.)
shown=$(script -qec "'$TRAJPACK' rm -q '$a' flat/step-000016.optim.safetensors" /dev/null < /dev/null) ||
    fail "rm of a file failed"
[ -z "$shown" ] || fail "rm -q showed on a terminal: $shown"
"$TRAJPACK" rm -r "$a" flat/fp32/ flat/fp32/step-000002.safetensors > "$TEST_TMP/rm.out" || fail "rm -r failed"
grep -q '^rm: removed 8 files and 1 directory; allocated .* -> ' "$TEST_TMP/rm.out" ||
    fail "rm -r said: $(cat "$TEST_TMP/rm.out")"
"$TRAJPACK" rm -f -q "$a" flat/nope flat/step-000002.optim.safetensors || fail "rm -f failed"
source_files flat -v 'fp32/|step-000016.optim|step-000002.optim' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "rm"
intact "$a"
cp "$a" "$TEST_TMP/before.traj"
"$TRAJPACK" rm -f -q "$a" flat/nope || fail "rm -f of nothing failed"
cmp -s "$a" "$TEST_TMP/before.traj" || fail "rm -f of nothing changed the archive"

# Removing a middle checkpoint gives space back at once: the chunks of
# the checkpoints before it that were deltas against it are re-encoded.
a=$(pack sharded)
before=$(allocated "$a")
"$TRAJPACK" rm -r -q "$a" sharded/checkpoint-8 || fail "rm -r of a middle checkpoint failed"
after=$(allocated "$a")
[ "$after" -lt "$before" ] || fail "allocated bytes $before -> $after after removing checkpoint-8"
source_files sharded -v '/checkpoint-8/' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "rm -r of checkpoint-8"
intact "$a"

# ---- prune: refusals ----

a=$(pack flat)
refused 2 'no rule given' "$a" prune "$a"
refused 2 'no rule given' "$a" prune --dry-run "$a"
refused 2 'keep-last' "$a" prune --keep-last 0 "$a"
refused 2 'keep-every' "$a" prune --keep-every x "$a"
# Keeping only multiples of 1000 would leave the runs nothing.
refused 1 'would keep no file' "$a" prune --keep-every 1000 "$a"
refused 1 'would keep no file' "$a" prune --keep typo "$a"
grep -q "warning: --keep 'typo' matches no file" "$TEST_TMP/stderr" || fail "no warning for --keep typo"

# ---- prune: the rules ----

# --keep-last: the last 3 of each of the three runs; config.json stays.
pruned "$a" --keep-last 3
source_files flat -v 'step-0000(02|04|06|08|10)\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "--keep-last 3"
# Nothing more to do.
"$TRAJPACK" prune "$a" --keep-last 3 > "$TEST_TMP/real" || fail "second prune failed"
grep -q '^prune: nothing to remove' "$TEST_TMP/real" || fail "second prune said: $(cat "$TEST_TMP/real")"

# --keep-every: steps 4, 8, 12 and 16; middle checkpoints go, so kept
# chunks that were deltas against them are re-encoded.
a=$(pack flat)
before=$(allocated "$a")
pruned "$a" --keep-every 4
[ "$(allocated "$a")" -lt "$before" ] || fail "--keep-every 4 freed no space"
source_files flat -v 'step-0000(02|06|10|14)\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "--keep-every 4"

# --keep: the checkpoints with a matching file, in each run.
a=$(pack flat)
pruned "$a" --keep 'step-000006*' --keep-last 1
source_files flat -v 'step-0000(02|04|08|10|12|14)\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "--keep step-000006* --keep-last 1"

# --drop: the optimizer states of old checkpoints only (they are a run of
# their own: the weights all stay).
a=$(pack flat)
pruned "$a" --keep-last 2 --drop '*.optim.safetensors'
source_files flat -v 'step-0000(02|04|06|08|10|12)\.optim' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "--keep-last 2 --drop *.optim.safetensors"

# The transformers Trainer's checkpoints: keep the last 3 and every 8th
# step whole, drop only optimizer.pt of the others.
a=$(pack trainer)
pruned "$a" --keep-last 3 --keep-every 8 --drop optimizer.pt
source_files trainer -v 'checkpoint-(2|4|6|10)/optimizer\.pt' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "trainer: --keep-last 3 --keep-every 8 --drop optimizer.pt"
# Then the old checkpoints whole: their directories go too.
pruned "$a" --keep-last 3 --keep-every 8
source_files trainer -E 'checkpoint-(8|12|14|16)/' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "trainer: --keep-last 3 --keep-every 8"
printf 'trainer/\ntrainer/checkpoint-12/\ntrainer/checkpoint-14/\ntrainer/checkpoint-16/\ntrainer/checkpoint-8/\n' |
    LC_ALL=C sort > "$TEST_TMP/want"
dirs "$a" > "$TEST_TMP/got"
cmp -s "$TEST_TMP/want" "$TEST_TMP/got" || { diff "$TEST_TMP/want" "$TEST_TMP/got" >&2; fail "trainer: other directories kept"; }

# ---- natural step order ----

# Unpadded steps: the last two are checkpoint-14 and checkpoint-16 (in
# byte order they would be checkpoint-6 and checkpoint-8).
a=$(pack sharded)
pruned "$a" --keep-last 2
source_files sharded -E 'checkpoint-(14|16)/' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "sharded: --keep-last 2"
a=$(pack nat)
pruned "$a" --keep-last 3 --keep 'step-2.*'
source_files nat -E 'config|step-(2|12|14|16)\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "nat: --keep-last 3 --keep step-2.*"

# ---- runs side by side ----

# run1 has steps 2 to 16, run2 steps 2 to 8: each keeps its own last two.
a=$(pack runs)
pruned "$a" --keep-last 2
source_files runs -E 'run1/step-(14|16)\.|run2/step-(6|8)\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "runs: --keep-last 2"

# -q prints nothing.
a=$(pack nat)
[ -z "$("$TRAJPACK" prune -q "$a" --keep-last 1)" ] || fail "prune -q printed something"
source_files nat -E 'config|step-16\.' > "$TEST_TMP/want"
expect "$a" "$TEST_TMP/want" "nat: --keep-last 1"
intact "$a"

exit 0
