#!/bin/sh
# Format version 1 (a catalog segment a commit), which archives of earlier
# releases have, still works end to end: created with --format-version 1,
# appended to, read back (extract, a mount), removed from, verified; its
# commits stay format 1, and only a rewrite (gc --rewrite, repack) turns
# it into format 2, with the same files. --format-version is for create
# only.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

traj=$TEST_TMP/traj
cp -pR "$top_srcdir/examples/tiny-run" "$traj"
archive=$TEST_TMP/a.traj
format_of() {
    "$TRAJPACK" stats --json "$1" |
        "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["format"])'
}

"$TRAJPACK" create -q --format-version 1 "$archive" "$traj/config.json" "$traj/step-000002.safetensors" ||
    fail "create --format-version 1 failed"
[ "$(format_of "$archive")" = 1 ] || fail "create --format-version 1 made format $(format_of "$archive")"
for f in "$traj"/step-00000[46]*.safetensors "$traj"/step-000002.optim.safetensors; do
    "$TRAJPACK" add -q "$archive" "$f" || fail "add $f failed"
done
[ "$(format_of "$archive")" = 1 ] || fail "add changed the format"
"$TRAJPACK" add -q --format-version 2 "$archive" "$traj/config.json" 2> "$TEST_TMP/err" &&
    fail "add took --format-version"
grep -q "only for create" "$TEST_TMP/err" || fail "unexpected message: $(cat "$TEST_TMP/err")"
"$TRAJPACK" create -q --format-version 3 "$TEST_TMP/b.traj" "$traj/config.json" 2> "$TEST_TMP/err" &&
    fail "create took format 3"
[ ! -e "$TEST_TMP/b.traj" ] || fail "a refused create left an archive"

# Read back, by extract and by a mount.
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed"
mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out" || fail "extract failed"
for f in "$traj"/*; do
    cmp "$f" "$TEST_TMP/out/$(basename "$f")" || fail "extract: $(basename "$f") differs"
done
start_mount "$archive" "$TEST_TMP/mnt"
for f in "$traj"/*; do
    cmp "$f" "$TEST_TMP/mnt/$(basename "$f")" || fail "mount: $(basename "$f") differs"
done
stop_mount "$TEST_TMP/mnt"

# Removing and rewriting.
"$TRAJPACK" rm -q "$archive" step-000004.safetensors || fail "rm failed"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after rm failed"
[ "$(format_of "$archive")" = 1 ] || fail "rm changed the format"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list.1"
"$TRAJPACK" gc -q --rewrite "$archive" || fail "gc --rewrite failed"
[ "$(format_of "$archive")" = 2 ] || fail "gc --rewrite left format $(format_of "$archive")"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list.2"
cmp "$TEST_TMP/list.1" "$TEST_TMP/list.2" || fail "gc --rewrite changed the files"
"$TRAJPACK" extract -q "$archive" step-000006.safetensors -O | cmp - "$traj/step-000006.safetensors" ||
    fail "step 6 differs after gc --rewrite"
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify after gc --rewrite failed"
