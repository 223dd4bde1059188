#!/bin/sh
# Bad input fails cleanly: every malformed safetensors file is refused by
# `add` with the parser's message and leaves the archive byte-identical;
# bad command lines exit 2 and operations on missing or foreign files
# exit 1, each with a message that says what is wrong.
set -eu
. "$(dirname "$0")/lib.sh"

make_seed_archive

# expect_fail STATUS MESSAGE COMMAND...: COMMAND exits STATUS and says
# MESSAGE (a fixed string) on stderr, in one line, and prints no stdout.
expect_fail() {
    want=$1 msg=$2
    shift 2
    status=0
    "$@" > "$TEST_TMP/stdout" 2> "$TEST_TMP/stderr" || status=$?
    [ "$status" = "$want" ] ||
        fail "$*: exit status $status, expected $want ($(cat "$TEST_TMP/stderr"))"
    grep -qF -- "$msg" "$TEST_TMP/stderr" ||
        fail "$*: expected '$msg' on stderr, got: $(cat "$TEST_TMP/stderr")"
    [ ! -s "$TEST_TMP/stdout" ] || fail "$*: printed on stdout: $(cat "$TEST_TMP/stdout")"
}

assert_archive_unchanged() {
    cmp -s "$archive" "$before" || fail "$1: the archive changed"
}

# ---- malformed safetensors ------------------------------------------------

bad=$TEST_TMP/bad
make_safetensors bad "$bad"
tab=$(printf '\t')
cases=0
while IFS="$tab" read -r file message; do
    [ -n "$file" ] || continue
    expect_fail 1 "$message" "$TRAJPACK" add -q "$archive" "$bad/$file"
    grep -qF "$file" "$TEST_TMP/stderr" || fail "$file: the message does not name the file"
    [ "$(wc -l < "$TEST_TMP/stderr")" -eq 1 ] ||
        fail "$file: more than one line of error: $(cat "$TEST_TMP/stderr")"
    assert_archive_unchanged "$file"
    cases=$((cases + 1))
done < "$bad/EXPECT"
[ "$cases" -ge 10 ] || fail "only $cases malformed files in $bad/EXPECT"

# A directory holding a bad file: what came before it stays committed,
# nothing of the bad file does.
mkdir "$TEST_TMP/mixed"
printf 'good\n' > "$TEST_TMP/mixed/a-good.txt"
cp "$bad/gap.safetensors" "$TEST_TMP/mixed/b-bad.safetensors"
expect_fail 1 "gap of 4 bytes" "$TRAJPACK" add -q "$archive" "$TEST_TMP/mixed"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list"
printf 'mixed/\nmixed/a-good.txt\nseed.txt\n' | cmp -s - "$TEST_TMP/list" ||
    fail "after a failed add the archive lists: $(cat "$TEST_TMP/list")"
cp "$archive" "$before"

# ---- bad command lines: exit 2 ----------------------------------------------

T=$TRAJPACK
new=$TEST_TMP/new.traj
seed=$TEST_TMP/seed.txt
expect_fail 2 "Usage: trajpack" "$T"
expect_fail 2 "unknown verb 'frobnicate'" "$T" frobnicate
for verb in create add; do
    expect_fail 2 "expected an ARCHIVE and at least one PATH" "$T" $verb
    expect_fail 2 "expected an ARCHIVE and at least one PATH" "$T" $verb "$new"
    for n in 0 abc -1 1.5 '' 99999999999999999999 2000; do
        expect_fail 2 "--threads: expected a whole number" "$T" $verb -T "$n" "$new" "$seed"
    done
    for n in x -3 65536 ''; do
        expect_fail 2 "--max-chain: expected a whole number" "$T" $verb --max-chain "$n" "$new" "$seed"
    done
    expect_fail 2 "option '-T' needs an argument" "$T" $verb "$new" "$seed" -T
    expect_fail 2 "--as and --parent need exactly one PATH" "$T" $verb --as x "$new" "$seed" "$seed"
    expect_fail 2 "'/' is not a path inside the archive" "$T" $verb --as / "$new" "$seed"
done
for n in 7 25 20x ''; do
    expect_fail 2 "--chunk-shift: expected a whole number from 8 to 24" \
        "$T" create --chunk-shift "$n" "$new" "$seed"
done
expect_fail 2 "--chunk-shift is only for create" "$T" add --chunk-shift 20 "$archive" "$seed"
expect_fail 2 "--parent needs a single regular file PATH" \
    "$T" add --parent seed.txt "$archive" "$TEST_TMP/mixed"
[ ! -e "$new" ] || fail "a usage error created $new"
expect_fail 2 "unknown option '--bogus'" "$T" list --bogus "$archive"
expect_fail 2 "unknown option '-z'" "$T" list -z "$archive"
expect_fail 2 "--long and --blobs exclude each other" "$T" list -l --blobs "$archive"
for verb in extract list stats; do
    expect_fail 2 "expected an ARCHIVE" "$T" $verb
done
expect_fail 2 "expected exactly one ARCHIVE" "$T" verify
expect_fail 2 "expected exactly one ARCHIVE" "$T" verify "$archive" "$archive"
expect_fail 2 "FILE arguments are for --tensors" "$T" stats "$archive" "$archive"
expect_fail 2 "--stdout needs exactly one PATH" "$T" extract -O "$archive"
expect_fail 2 "--stdout needs exactly one PATH" "$T" extract -O "$archive" seed.txt mixed
expect_fail 2 "--stdout needs exactly one PATH and no -C" \
    "$T" extract -O -C "$TEST_TMP" "$archive" seed.txt
assert_archive_unchanged "usage errors"

# ---- operations that fail: exit 1 -------------------------------------------

missing=$TEST_TMP/missing.traj
expect_fail 1 "$missing" "$T" list "$missing"
expect_fail 1 "$missing" "$T" verify "$missing"
expect_fail 1 "$missing" "$T" stats "$missing"
expect_fail 1 "$missing" "$T" extract "$missing" -C "$TEST_TMP"
expect_fail 1 "$missing" "$T" add -q "$missing" "$seed"
[ ! -e "$missing" ] || fail "add created $missing"

# A file that is not an archive: refused, and add leaves it alone.
cp "$seed" "$TEST_TMP/notes.txt"
for verb in list verify stats; do
    expect_fail 1 "$TEST_TMP/notes.txt" "$T" $verb "$TEST_TMP/notes.txt"
done
expect_fail 1 "$TEST_TMP/notes.txt" "$T" add -q "$TEST_TMP/notes.txt" "$seed"
cmp -s "$seed" "$TEST_TMP/notes.txt" || fail "add changed a file that is not an archive"

expect_fail 1 "already exists" "$T" create -q "$archive" "$seed"
expect_fail 1 "already exists" "$T" create -q "$TEST_TMP/notes.txt" "$seed"
cmp -s "$seed" "$TEST_TMP/notes.txt" || fail "create changed an existing file"
expect_fail 1 "$TEST_TMP/nothing: No such file or directory" \
    "$T" add -q "$archive" "$TEST_TMP/nothing"
expect_fail 1 "no/such/path: not in the archive" "$T" list "$archive" no/such/path
expect_fail 1 "no/such/path: not in the archive" "$T" extract "$archive" no/such/path -C "$TEST_TMP"
expect_fail 1 "mixed: not a regular file" "$T" extract "$archive" mixed -O
expect_fail 1 "$TEST_TMP/no-dir" "$T" extract "$archive" -C "$TEST_TMP/no-dir"
assert_archive_unchanged "failed operations"

exit 0
