# Sourced by the shell tests: paths to the tools, a scratch directory that
# is removed on exit, and the test data generators.
#
# `make check` exports top_srcdir and top_builddir (absolute); when a test
# is run by hand they default to the checkout the test lies in.

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"

TRAJPACK=$top_builddir/trajpack
# Debian's interpreter: CI installs python3-torch for it (a python3 found
# first on PATH, e.g. from pyenv, may not have torch).
PYTHON=/usr/bin/python3

TEST_NAME=$(basename "$0" .sh)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/trajfs-$TEST_NAME.XXXXXX")
trap 'rm -rf "$TEST_TMP"' EXIT

fail() {
    echo "FAIL: $TEST_NAME: $*" >&2
    exit 1
}

[ -x "$TRAJPACK" ] || fail "$TRAJPACK not built"

# Runs the test-data generator (tests/tools/make_trajectory.py: a real,
# tiny training run, about a second) into DIR: config.json, bf16/ and
# fp32/ checkpoints and optimizer files. Without torch the test fails: it
# must not pass silently.
generate_tiny_trajectory() {
    generate_trajectory "$1" --layers 1 --width 32 --heads 2 --ctx 16 --batch 2 \
        --steps 6 --interval 2 --max-chars 20000 --dtype bf16,fp32 --optimizer
}

# generate_trajectory DIR [make_trajectory.py options...]
# (Helpers name their variables _like_this: sh has no local variables, and
# the tests' own names must not be overwritten.)
generate_trajectory() {
    _gen_out=$1
    shift
    [ -x "$PYTHON" ] || fail "$PYTHON not found (apt-get install python3)"
    "$PYTHON" -c 'import torch' 2>/dev/null ||
        fail "$PYTHON cannot import torch (sh .ci/install-deps --tests)"
    "$PYTHON" "$top_srcdir/tests/tools/make_trajectory.py" --out "$_gen_out" "$@" \
        > "$TEST_TMP/generator.log" 2>&1 ||
        { cat "$TEST_TMP/generator.log" >&2; fail "make_trajectory.py failed"; }
}

# make_safetensors good|bad DIR: hand-made fixtures (tests/tools).
make_safetensors() {
    mkdir -p "$2"
    "$PYTHON" "$top_srcdir/tests/tools/make_safetensors.py" "$1" "$2" ||
        fail "make_safetensors.py $1 failed"
}

# Size of a file in bytes.
file_size() {
    stat -c %s "$1"
}

# Asserts that every file, symlink and directory below $1 exists below $2
# with the same content (or target), permission bits and mtime.
assert_same_tree() {
    (cd "$1" && find . | LC_ALL=C sort) > "$TEST_TMP/tree.a"
    (cd "$2" && find . | LC_ALL=C sort) > "$TEST_TMP/tree.b"
    cmp -s "$TEST_TMP/tree.a" "$TEST_TMP/tree.b" ||
        { diff "$TEST_TMP/tree.a" "$TEST_TMP/tree.b" >&2; fail "$2 does not have the entries of $1"; }
    while IFS= read -r _p; do
        _a=$1/$_p _b=$2/$_p
        [ "$(stat -c %y "$_a")" = "$(stat -c %y "$_b")" ] || fail "mtime of $_p differs"
        if [ -L "$_a" ]; then
            [ -L "$_b" ] && [ "$(readlink "$_a")" = "$(readlink "$_b")" ] ||
                fail "symlink $_p differs"
            continue
        fi
        [ "$(stat -c %a "$_a")" = "$(stat -c %a "$_b")" ] || fail "mode of $_p differs"
        if [ -f "$_a" ]; then
            cmp "$_a" "$_b" || fail "content of $_p differs"
        fi
    done < "$TEST_TMP/tree.a"
}

# damage_blob ARCHIVE: flips one byte in the middle of the payload of the
# archive's largest blob; prints the blob's index.
damage_blob() {
    set -- "$1" $("$TRAJPACK" list --blobs "$1" |
                  awk -F '\t' 'NR > 1 && $3 > len { len = $3; blob = $1; at = $2 + int($3 / 2) }
                               END { print blob, at }')
    [ $# = 3 ] || fail "list --blobs gave no blob to damage"
    _byte=$(od -An -tu1 -j "$3" -N1 "$1" | tr -d ' ')
    printf "\\$(printf %03o $((_byte ^ 0xff)))" | dd of="$1" bs=1 seek="$3" conv=notrunc 2> /dev/null
    echo "$2"
}

# rewrite_refused VERB ARCHIVE PATTERN [WRAPPER...]: `WRAPPER... trajpack
# VERB -q ARCHIVE` (VERB: "gc --rewrite", repack; split at spaces) fails
# with status 1 and a message that
# PATTERN (grep) matches, and leaves ARCHIVE as it was, with no temporary
# file beside it.
rewrite_refused() {
    _verb=$1 _archive=$2 _pattern=$3
    shift 3
    cp "$_archive" "$TEST_TMP/refused.before"
    _status=0
    # shellcheck disable=SC2086 # the verb and its option are two words
    "$@" "$TRAJPACK" $_verb -q "$_archive" > /dev/null 2> "$TEST_TMP/err" || _status=$?
    [ "$_status" -eq 1 ] || fail "$_verb of $_archive: status $_status, expected 1"
    grep -q "$_pattern" "$TEST_TMP/err" || fail "$_verb of $_archive said: $(cat "$TEST_TMP/err")"
    cmp -s "$_archive" "$TEST_TMP/refused.before" || fail "the refused $_verb changed $_archive"
    ! ls "$_archive".* 2> /dev/null || fail "the refused $_verb left a temporary file"
}

# make_seed_archive: sets archive, an archive of one small file
# ($TEST_TMP/seed.txt), and before, a copy of it for showing that what
# was refused left the archive byte-identical.
make_seed_archive() {
    archive=$TEST_TMP/a.traj
    before=$TEST_TMP/before.traj
    printf 'first file\n' > "$TEST_TMP/seed.txt"
    "$TRAJPACK" create -q "$archive" "$TEST_TMP/seed.txt" || fail "create failed"
    cp "$archive" "$before"
}
