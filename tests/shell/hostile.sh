#!/bin/sh
# Hostile input on the add side: names the archive cannot hold and
# safetensors files declaring huge headers are refused with a one-line
# message that says why (control characters shown as \xNN, never sent to
# the terminal), nothing is allocated for a declared size, and the archive
# stays byte-identical. Hostile archives (names, sizes, cycles, chains)
# are tests/unit/test_hostile.c.
set -eu
. "$(dirname "$0")/lib.sh"

make_seed_archive
"$TRAJPACK" list "$archive" > "$TEST_TMP/list.before"

# refuse MESSAGE ARGS...: `trajpack add -q ARCHIVE ARGS...` exits 1 with
# MESSAGE (a fixed string) in a single line of stderr free of control
# characters, and leaves the archive as it was.
refuse() {
    msg=$1
    shift
    status=0
    "$TRAJPACK" add -q "$@" > "$TEST_TMP/stdout" 2> "$TEST_TMP/stderr" || status=$?
    [ "$status" -eq 1 ] || fail "add $*: exit status $status, expected 1 ($(cat "$TEST_TMP/stderr"))"
    grep -qF -- "$msg" "$TEST_TMP/stderr" ||
        fail "add $*: expected '$msg', got: $(cat "$TEST_TMP/stderr")"
    [ "$(wc -l < "$TEST_TMP/stderr")" -eq 1 ] || fail "add $*: more than one line: $(cat "$TEST_TMP/stderr")"
    if tr -d '\n' < "$TEST_TMP/stderr" | LC_ALL=C grep -q '[[:cntrl:]]'; then
        fail "add $*: the message holds control characters: $(od -c "$TEST_TMP/stderr" | head -5)"
    fi
    cmp -s "$archive" "$before" || fail "add $*: the archive changed"
}

# ---- names with control characters ----------------------------------------

names=$TEST_TMP/names
mkdir "$names"
for code in 01 09 0a 1b 7f; do
    # $(...) drops trailing newlines: end it with a guard, then cut that.
    char=$(printf "\\$(printf '%03o' "0x$code")_")
    name="bad${char%_}name-$code.txt"
    printf 'x\n' > "$names/$name"
    refuse "path contains control character 0x$code" "$archive" "$names/$name"
    refuse "\\x$code" "$archive" "$names/$name"
    rm "$names/$name"
done

# An escape sequence in a directory's file: the whole add is refused up
# front, before any commit, and nothing of the directory is listed.
tree=$TEST_TMP/tree
mkdir "$tree"
printf 'a\n' > "$tree/a-good.txt"
printf 'b\n' > "$tree/b$(printf '\033')[2Jclear.txt"
printf 'c\n' > "$tree/c-good.txt"
refuse 'cannot be stored as "tree/b\x1b[2Jclear.txt": path contains control character 0x1b' \
    "$archive" "$tree"
"$TRAJPACK" list "$archive" | cmp -s - "$TEST_TMP/list.before" ||
    fail "a refused directory left entries: $("$TRAJPACK" list "$archive")"

# ---- names the archive cannot hold, given with --as ------------------------

seed=$TEST_TMP/seed.txt
long=$(printf '%0256d' 0)
deep=$(printf 'd/%.0s' $(seq 64))x
path4097=$(printf '%0255d/' $(seq 16))x # 16 x 256 + 1 bytes
refuse 'path "x/../y" has a "." or ".." component' --as x/../y "$archive" "$seed"
refuse 'has a "." or ".." component' --as .. "$archive" "$seed"
refuse 'path component of 256 bytes is longer than 255' --as "$long" "$archive" "$seed"
refuse 'path of 4097 bytes is longer than 4096' --as "$path4097" "$archive" "$seed"
refuse 'path is nested deeper than 64' --as "$deep" "$archive" "$seed"
refuse 'path contains control character 0x1b' --as "$(printf 'x\033[31m')" "$archive" "$seed"

# ---- link targets with control characters -----------------------------------

# A link target may hold any byte but NUL, in an archive as on disk: the
# long listing shows the control characters of one as \xNN, so that no
# escape sequence reaches the terminal and the entry stays on one line.
links=$TEST_TMP/links
mkdir "$links"
ln -s "$(printf 'x\033]0;owned\007\033[2J\ny\177_')" "$links/bad-link"
links_archive=$TEST_TMP/links.traj
"$TRAJPACK" create -q "$links_archive" "$links" || fail "create of a link failed"
"$TRAJPACK" list -l "$links_archive" > "$TEST_TMP/links.list" ||
    fail "list -l failed: $(cat "$TEST_TMP/links.list")"
grep -qF -- 'links/bad-link -> x\x1b]0;owned\x07\x1b[2J\x0ay\x7f_' "$TEST_TMP/links.list" ||
    fail "list -l does not show the link target escaped: $(od -c "$TEST_TMP/links.list" | head -20)"
if tr -d '\n' < "$TEST_TMP/links.list" | LC_ALL=C grep -q '[[:cntrl:]]'; then
    fail "list -l sends control characters: $(od -c "$TEST_TMP/links.list" | head -20)"
fi
# links/, links/bad-link and the total line
[ "$(wc -l < "$TEST_TMP/links.list")" -eq 3 ] ||
    fail "list -l is not one line per entry: $(cat "$TEST_TMP/links.list")"

# ---- safetensors files that declare a huge header ----------------------------

# The 8-byte length is checked against the limit and the file size before
# anything is allocated: under a 300 MB address-space limit, a declared
# 2^64-1 bytes fails with its message, not with "out of memory".
declare_header() { # FILE LENGTH: an 8-byte little-endian length, then "{}"
    "$PYTHON" -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<Q", int(sys.argv[2])) + b"{}" + b" " * 64)' "$1" "$2"
}
for len in 18446744073709551615 9223372036854775808 104857601; do
    declare_header "$TEST_TMP/huge-$len.safetensors" "$len"
    # shellcheck disable=SC3045 # dash and bash have ulimit -v
    (ulimit -v 300000 2> /dev/null || true
     refuse "header length $len exceeds the limit of 104857600 bytes" \
        "$archive" "$TEST_TMP/huge-$len.safetensors") || exit 1
done
declare_header "$TEST_TMP/past-end.safetensors" 1048576
refuse "header length 1048576 exceeds the file size 74" "$archive" "$TEST_TMP/past-end.safetensors"

"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed after the refused adds"
exit 0
