#!/bin/sh
# Archives written by release 1 (safetensors entries with an inline
# header) still open and read byte-identical, through extract and a
# mount; a checkpoint added to one is the run's newest, one added out
# of order finds its references in the old entries; a rename in a writable mount keeps an old entry readable.
# tests/fixtures/release1.trajfs was made by release 1 with
# `trajpack create --chunk-shift 12 release1.trajfs run`, where run/ held
# examples/tiny-run/step-000002.safetensors, step-000004.safetensors and
# config.json, a symlink link -> config.json and an empty sub/empty.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

fixture=$top_srcdir/tests/fixtures/release1.trajfs
tiny=$top_srcdir/examples/tiny-run
archive=$TEST_TMP/release1.trajfs
cp "$fixture" "$archive"
chmod u+w "$archive"

# The expected tree, made from the originals.
want=$TEST_TMP/want/run
mkdir -p "$want/sub"
cp "$tiny/step-000002.safetensors" "$tiny/step-000004.safetensors" "$tiny/config.json" "$want/"
ln -s config.json "$want/link"
: > "$want/sub/empty"

same_files() { # DIR: the files of DIR/run are the originals
    for _f in step-000002.safetensors step-000004.safetensors config.json link sub/empty; do
        cmp "$want/$_f" "$1/$_f" || fail "$1/$_f differs from the original"
    done
    [ "$(readlink "$1/link")" = config.json ] || fail "$1/link: wrong target"
}

"$TRAJPACK" verify -q "$archive" || fail "verify of the release-1 archive failed"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list"
grep -qx "run/step-000004.safetensors" "$TEST_TMP/list" || fail "list lacks the checkpoint"

mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out" || fail "extract failed"
same_files "$TEST_TMP/out/run"

start_mount "$archive" "$TEST_TMP/mnt"
same_files "$TEST_TMP/mnt/run"
stop_mount "$TEST_TMP/mnt"

# A new checkpoint finds its references in the old entries' tensors (no
# warning of a checkpoint that matches nothing in its run). It is the
# newest: keyframes. The old step 4, whose chunks are deltas against step
# 2 (release 1 chained nearest references), is not re-encoded: reverse
# references re-encode keyframes only.
"$TRAJPACK" add -q --as run/step-000006.safetensors "$archive" "$tiny/step-000006.safetensors" \
    2> "$TEST_TMP/add.err" || fail "add to the release-1 archive failed"
[ ! -s "$TEST_TMP/add.err" ] ||
    fail "step 6 found no references in the release-1 checkpoints: $(cat "$TEST_TMP/add.err")"
"$TRAJPACK" extract -q -O "$archive" run/step-000006.safetensors > "$TEST_TMP/step6"
cmp "$tiny/step-000006.safetensors" "$TEST_TMP/step6" || fail "step 6 reads back differently"
"$TRAJPACK" stats --tensors "$archive" run > "$TEST_TMP/tensors"
awk -F '\t' '$1 == "run/step-000006.safetensors" && $8 != "-" { exit 1 }' "$TEST_TMP/tensors" ||
    { cat "$TEST_TMP/tensors" >&2; fail "step 6, the newest, has references"; }
grep -q "^run/step-000004.safetensors.*run/step-000002.safetensors" "$TEST_TMP/tensors" ||
    { cat "$TEST_TMP/tensors" >&2; fail "the release-1 step 4 lost its references to step 2"; }
"$TRAJPACK" verify -q "$archive" || fail "verify after adding step 6 failed"
# An out-of-order add, step 5: step 4 with one element of its last tensor changed, so that
# the tensor is new and the others are step 4's; the new tensor is a
# delta against the nearest earlier entry's, release-1 step 4.
cp "$tiny/step-000004.safetensors" "$TEST_TMP/step5.in"
python3 - "$TEST_TMP/step5.in" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-2, 2)
    low = f.read(1)[0]
    f.seek(-2, 2)
    f.write(bytes([low ^ 1]))
PY
"$TRAJPACK" add -q --as run/step-000005.safetensors "$archive" "$TEST_TMP/step5.in" ||
    fail "an out-of-order add to the release-1 archive failed"
"$TRAJPACK" extract -q -O "$archive" run/step-000005.safetensors > "$TEST_TMP/step5"
cmp "$TEST_TMP/step5.in" "$TEST_TMP/step5" || fail "step 5 reads back differently"
"$TRAJPACK" stats --tensors "$archive" run/step-000005.safetensors > "$TEST_TMP/tensors"
grep -q "run/step-000004.safetensors" "$TEST_TMP/tensors" ||
    { cat "$TEST_TMP/tensors" >&2; fail "step 5 found no reference in the release-1 step 4"; }
"$TRAJPACK" verify -q "$archive" || fail "verify after the adds failed"

# A rename writes the old entry again, its header still inline.
start_mount "$archive" "$TEST_TMP/mnt" -o rw
mv "$TEST_TMP/mnt/run/step-000002.safetensors" "$TEST_TMP/mnt/run/moved.safetensors"
stop_mount "$TEST_TMP/mnt"
"$TRAJPACK" verify -q "$archive" || fail "verify after the rename failed"
"$TRAJPACK" extract -q -O "$archive" run/moved.safetensors > "$TEST_TMP/moved"
cmp "$tiny/step-000002.safetensors" "$TEST_TMP/moved" || fail "the renamed release-1 file differs"
exit 0
