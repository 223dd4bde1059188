#!/bin/sh
# Byte-identical round trip through an archive: a real (tiny) trajectory,
# hand-made safetensors of every dtype and shape, opaque files, empty files
# and directories, a symlink; modes and mtimes too. Also list, verify,
# stats --json, extracting a subtree or one file, and the overwrite rules.
set -eu
. "$(dirname "$0")/lib.sh"

src=$TEST_TMP/src
archive=$TEST_TMP/a.traj
mkdir -p "$src"
generate_tiny_trajectory "$src/run"
make_safetensors good "$src/handmade"

misc=$src/misc
mkdir -p "$misc/deeper/deepest" "$misc/emptydir"
printf 'plain text\n' > "$misc/notes.txt"
: > "$misc/empty"
: > "$misc/deeper/deepest/empty.safetensors.txt"
seq 1 30000 > "$misc/deeper/numbers.txt"
# Safetensors bytes under another name are opaque data.
cp "$src/run/fp32/step-000002.safetensors" "$misc/deeper/checkpoint.bin"
ln -s ../run/config.json "$misc/link"
chmod 0600 "$misc/notes.txt"
chmod 0755 "$misc/deeper/numbers.txt"
chmod 0750 "$misc/deeper"
chmod 0700 "$misc/emptydir"

"$TRAJPACK" create -q "$archive" "$src/run" "$src/handmade" "$misc" ||
    fail "create failed"

out=$TEST_TMP/out
mkdir "$out"
"$TRAJPACK" extract -q "$archive" -C "$out" || fail "extract failed"
for d in run handmade misc; do
    assert_same_tree "$src/$d" "$out/$d"
done

# list: exactly the entries (directories with a trailing '/').
"$TRAJPACK" list "$archive" > "$TEST_TMP/list" || fail "list failed"
(cd "$src" && find run handmade misc -type d | sed 's|$|/|'
 cd "$src" && find run handmade misc ! -type d) | LC_ALL=C sort > "$TEST_TMP/expected"
LC_ALL=C sort "$TEST_TMP/list" > "$TEST_TMP/list.sorted"
cmp -s "$TEST_TMP/expected" "$TEST_TMP/list.sorted" ||
    { diff "$TEST_TMP/expected" "$TEST_TMP/list.sorted" >&2; fail "list shows other entries"; }

# list -l: one line per entry (path last, or before "-> target"), a total.
"$TRAJPACK" list -l "$archive" > "$TEST_TMP/long" || fail "list -l failed"
grep -v '^total: ' "$TEST_TMP/long" |
    awk '{ if ($(NF-1) == "->") print $(NF-2); else print $NF }' |
    LC_ALL=C sort > "$TEST_TMP/long.paths"
cmp -s "$TEST_TMP/list.sorted" "$TEST_TMP/long.paths" ||
    { diff "$TEST_TMP/list.sorted" "$TEST_TMP/long.paths" >&2; fail "list -l shows other entries"; }
grep -q '^total: ' "$TEST_TMP/long" || fail "list -l has no total line"
grep -q ' misc/link -> \.\./run/config\.json$' "$TEST_TMP/long" ||
    fail "list -l does not show the symlink target"

"$TRAJPACK" verify -q "$archive" > "$TEST_TMP/verify" || fail "verify failed"
grep -q ': OK$' "$TEST_TMP/verify" || fail "verify did not say OK"

"$TRAJPACK" stats --json "$archive" > "$TEST_TMP/stats.json" || fail "stats failed"
"$PYTHON" -m json.tool "$TEST_TMP/stats.json" > /dev/null || fail "stats --json is not JSON"
"$TRAJPACK" stats "$archive" > /dev/null || fail "stats failed"

# One file to stdout; one subtree (with a leading "./" and a trailing "/").
"$TRAJPACK" extract -q "$archive" run/bf16/step-000004.safetensors -O > "$TEST_TMP/one" ||
    fail "extract -O failed"
cmp "$src/run/bf16/step-000004.safetensors" "$TEST_TMP/one" || fail "extract -O differs"
mkdir "$TEST_TMP/sub"
"$TRAJPACK" extract -q "$archive" ./misc/deeper/ -C "$TEST_TMP/sub" || fail "subtree extract failed"
assert_same_tree "$misc/deeper" "$TEST_TMP/sub/misc/deeper"
[ ! -e "$TEST_TMP/sub/misc/notes.txt" ] || fail "subtree extract wrote more than the subtree"

# Existing files are kept unless --force.
printf 'changed' > "$out/misc/notes.txt"
if "$TRAJPACK" extract -q "$archive" misc/notes.txt -C "$out" 2> "$TEST_TMP/err"; then
    fail "extract replaced an existing file without --force"
fi
grep -q 'notes.txt.*--force' "$TEST_TMP/err" || fail "no hint at --force: $(cat "$TEST_TMP/err")"
[ "$(cat "$out/misc/notes.txt")" = changed ] || fail "the existing file was touched"
"$TRAJPACK" extract -q -f "$archive" misc/notes.txt -C "$out" || fail "extract --force failed"
cmp "$misc/notes.txt" "$out/misc/notes.txt" || fail "extract --force did not restore the file"

# An archive inside a directory being added is left out of itself.
inner=$TEST_TMP/inner
mkdir "$inner"
printf 'inside\n' > "$inner/file"
"$TRAJPACK" create -q "$inner/self.traj" "$inner/file" || fail "create failed"
"$TRAJPACK" add -q "$inner/self.traj" "$inner" 2> "$TEST_TMP/err" || fail "add of the archive's directory failed"
grep -q 'self\.traj: skipped: it is the archive itself$' "$TEST_TMP/err" ||
    fail "no message about skipping the archive: $(cat "$TEST_TMP/err")"
"$TRAJPACK" list "$inner/self.traj" > "$TEST_TMP/list"
printf 'file\ninner/\ninner/file\n' | cmp -s - "$TEST_TMP/list" ||
    fail "the archive's directory was stored as: $(cat "$TEST_TMP/list")"

exit 0
