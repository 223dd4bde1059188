#!/bin/sh
# The command line itself: --help of trajpack and of every verb (exit 0,
# every option mentioned, and every option in the man page too),
# --version, and -q keeping stderr silent on success, also on a terminal.
set -eu
. "$(dirname "$0")/lib.sh"

man_page=$top_srcdir/man/trajpack.1
[ -f "$man_page" ] || fail "$man_page missing"
# The man page with roff's \- turned into plain '-'.
sed 's/\\-/-/g' "$man_page" > "$TEST_TMP/man.txt"

# has_option FILE OPTION: OPTION occurs as a word of its own ("-q" does
# not count as part of "--quiet").
has_option() {
    grep -qE -- "(^|[^-[:alnum:]])$2([^-[:alnum:]]|\$)" "$1"
}

# The options of each verb; every one must be in --help and in the man page.
options_of() {
    case $1 in
    create) echo -T --threads --max-chain --budget --all-programs --chunk-shift --as --parent -q \
        --quiet -h --help ;;
    add) echo -T --threads --max-chain --budget --all-programs --as --parent -q --quiet -h --help ;;
    extract) echo -C --directory -O --stdout -f --force -q --quiet -h --help ;;
    list) echo -l --long --blobs -h --help ;;
    verify) echo -q --quiet -h --help ;;
    stats) echo --json --tensors -h --help ;;
    gc) echo -q --quiet -h --help ;;
    rm) echo -r -R --recursive -f --force -q --quiet -h --help ;;
    prune) echo --keep-last --keep-every --keep --drop -n --dry-run -q --quiet -h --help ;;
    repack) echo -T --threads --max-chain --budget --search --all-programs --chunk-shift -q --quiet \
        -h --help ;;
    push) echo -f --follow -q --quiet -h --help ;;
    esac
}

verbs="create add extract list verify stats rm prune gc repack push"
"$TRAJPACK" --help > "$TEST_TMP/help" 2> "$TEST_TMP/err" || fail "trajpack --help failed"
[ ! -s "$TEST_TMP/err" ] || fail "trajpack --help wrote to stderr"
for verb in $verbs; do
    grep -q "^  $verb " "$TEST_TMP/help" || fail "trajpack --help does not list $verb"
    grep -q "^\.SS $verb\$" "$TEST_TMP/man.txt" || fail "the man page has no section for $verb"
    for flag in --help -h; do
        "$TRAJPACK" $verb $flag > "$TEST_TMP/help.$verb" 2> "$TEST_TMP/err" ||
            fail "trajpack $verb $flag failed"
        [ ! -s "$TEST_TMP/err" ] || fail "trajpack $verb $flag wrote to stderr"
        grep -q "^Usage: trajpack $verb " "$TEST_TMP/help.$verb" ||
            fail "trajpack $verb $flag shows no usage line"
    done
    for opt in $(options_of $verb); do
        has_option "$TEST_TMP/help.$verb" "$opt" || fail "trajpack $verb --help does not mention $opt"
        has_option "$TEST_TMP/man.txt" "$opt" || fail "the man page does not mention $opt"
    done
done
has_option "$TEST_TMP/man.txt" --version || fail "the man page does not mention --version"
for section in "EXIT STATUS" EXAMPLES FILES "SEE ALSO"; do
    grep -q "^\.SH \"*$section\"*\$" "$TEST_TMP/man.txt" || fail "the man page has no $section"
done

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
[ -n "$version" ] || fail "no PACKAGE_VERSION in $top_builddir/config.h"
for flag in --version -V; do
    "$TRAJPACK" $flag > "$TEST_TMP/version" || fail "trajpack $flag failed"
    grep -qF "$version" "$TEST_TMP/version" || fail "trajpack $flag does not say $version"
done

# -q: nothing on stderr for a successful run of every verb.
generate_tiny_trajectory "$TEST_TMP/run"
archive=$TEST_TMP/a.traj
quiet() { # quiet COMMAND...: succeeds and writes nothing to stderr
    "$@" > /dev/null 2> "$TEST_TMP/err" || fail "$* failed: $(cat "$TEST_TMP/err")"
    [ ! -s "$TEST_TMP/err" ] || fail "$* wrote to stderr: $(cat "$TEST_TMP/err")"
}
mkdir "$TEST_TMP/out"
quiet "$TRAJPACK" create -q "$archive" "$TEST_TMP/run/bf16"
quiet "$TRAJPACK" add -q "$archive" "$TEST_TMP/run/fp32"
quiet "$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out"
quiet "$TRAJPACK" list -l "$archive"
quiet "$TRAJPACK" verify -q "$archive"
quiet "$TRAJPACK" stats --json "$archive"
cp "$archive" "$TEST_TMP/thin.traj"
quiet "$TRAJPACK" prune -q "$TEST_TMP/thin.traj" --keep-last 2
quiet "$TRAJPACK" rm -q -r "$TEST_TMP/thin.traj" fp32
quiet "$TRAJPACK" gc -q "$archive"
quiet "$TRAJPACK" gc -q --rewrite "$archive"
quiet "$TRAJPACK" repack -q "$archive"

# --budget: what is not a whole number from 1 to 4096 is refused (status
# 2, a message naming the option, no archive); a budget in range writes
# an archive that extracts byte for byte.
for bad in 0 4097 -1 abc 4x ""; do
    status=0
    "$TRAJPACK" create -q --budget "$bad" "$TEST_TMP/b.traj" "$TEST_TMP/run/bf16" \
        > /dev/null 2> "$TEST_TMP/err" || status=$?
    [ "$status" -eq 2 ] || fail "--budget '$bad': status $status, expected 2"
    grep -q -- "--budget: expected a whole number from 1 to 4096, got '$bad'" "$TEST_TMP/err" ||
        fail "--budget '$bad': unclear message: $(cat "$TEST_TMP/err")"
    [ ! -e "$TEST_TMP/b.traj" ] || fail "--budget '$bad' created an archive"
done
status=0
"$TRAJPACK" add -q --budget 0 "$archive" "$TEST_TMP/run/bf16" 2> "$TEST_TMP/err" || status=$?
[ "$status" -eq 2 ] || fail "add --budget 0: status $status, expected 2"
quiet "$TRAJPACK" create -q --budget 1 "$TEST_TMP/b.traj" "$TEST_TMP/run/bf16"
quiet "$TRAJPACK" add -q --budget 64 "$TEST_TMP/b.traj" "$TEST_TMP/run/fp32"
rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
quiet "$TRAJPACK" extract -q "$TEST_TMP/b.traj" -C "$TEST_TMP/out"
for d in bf16 fp32; do
    diff -r "$TEST_TMP/run/$d" "$TEST_TMP/out/$d" > /dev/null || fail "--budget: $d differs"
done

# --all-programs: programs for tensors with a reference too; the archive
# extracts byte for byte (which codecs it picks, test_writer_prog checks).
rm -f "$TEST_TMP/b.traj"
quiet "$TRAJPACK" create -q --all-programs "$TEST_TMP/b.traj" "$TEST_TMP/run/bf16"
quiet "$TRAJPACK" add -q --all-programs "$TEST_TMP/b.traj" "$TEST_TMP/run/fp32"
rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
quiet "$TRAJPACK" extract -q "$TEST_TMP/b.traj" -C "$TEST_TMP/out"
for d in bf16 fp32; do
    diff -r "$TEST_TMP/run/$d" "$TEST_TMP/out/$d" > /dev/null || fail "--all-programs: $d differs"
done

# stats --tensors: a line per tensor (9 tab-separated fields) of the files
# named; the first checkpoint, with no parent, has programs.
"$TRAJPACK" stats --tensors "$archive" bf16 > "$TEST_TMP/tensors" ||
    fail "stats --tensors failed"
awk -F '\t' 'NF != 9 { exit 1 } $1 !~ /^bf16\// { exit 1 }' "$TEST_TMP/tensors" ||
    fail "stats --tensors: bad lines: $(head -3 "$TEST_TMP/tensors")"
grep -qE "$(printf '\tprog:[0-9]+\t(merge|lit|const|repeat|concat|map|scan)')" "$TEST_TMP/tensors" ||
    fail "stats --tensors names no program: $(head -3 "$TEST_TMP/tensors")"
"$TRAJPACK" stats --tensors --json "$archive" > "$TEST_TMP/tensors.json" ||
    fail "stats --tensors --json failed"
"$PYTHON" -c '
import json, sys
t = json.load(open(sys.argv[1]))["tensors"]
assert t and any(x["program"] for x in t), "no program"
assert all(set(x) == {"file", "tensor", "dtype", "bytes", "stored_bytes", "chunks", "program",
                      "reference"} for x in t)
' "$TEST_TMP/tensors.json" || fail "stats --tensors --json: bad output"
status=0
"$TRAJPACK" stats --tensors "$archive" no-such-file > /dev/null 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "stats --tensors of a missing file: status $status, expected 1"
status=0
"$TRAJPACK" stats "$archive" bf16 > /dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "stats FILE without --tensors: status $status, expected 2"

# Where a directory PATH lands: under its base name at the top of the
# archive; with --as NAME at NAME (missing parents made), its contents
# below it, and a directory already at NAME keeps its other entries.
where=$TEST_TMP/where.traj
mkdir "$TEST_TMP/extra" && echo extra > "$TEST_TMP/extra/notes.txt"
quiet "$TRAJPACK" create -q "$where" "$TEST_TMP/run/bf16"
quiet "$TRAJPACK" add -q --as runs/b/weights "$where" "$TEST_TMP/run/bf16"
quiet "$TRAJPACK" add -q --as bf16 "$where" "$TEST_TMP/extra"
tree_as() { # tree_as NAME: the listing of run/bf16 stored as NAME
    (cd "$TEST_TMP/run" && find bf16 -type d | sed "s|^bf16|$1|; s|\$|/|" &&
        find bf16 ! -type d | sed "s|^bf16|$1|")
}
{ tree_as bf16; echo bf16/notes.txt; printf 'runs/\nruns/b/\n'; tree_as runs/b/weights; } |
    LC_ALL=C sort > "$TEST_TMP/where.expected"
"$TRAJPACK" list "$where" | LC_ALL=C sort | diff "$TEST_TMP/where.expected" - ||
    fail "the directories did not land where they should"
rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
quiet "$TRAJPACK" extract -q "$where" -C "$TEST_TMP/out" runs
diff -r "$TEST_TMP/run/bf16" "$TEST_TMP/out/runs/b/weights" > /dev/null ||
    fail "--as runs/b/weights: the contents differ"

# gc of an archive with a damaged blob (one byte of its payload flipped)
# stops with status 1 and a message naming the blob, and leaves the
# archive as it was: a rewrite does not pass damage on. (A second commit
# gives gc work to do.)
damaged=$TEST_TMP/damaged.traj
cp "$archive" "$damaged"
echo note > "$TEST_TMP/note.txt"
quiet "$TRAJPACK" add -q "$damaged" "$TEST_TMP/note.txt"
blob=$(damage_blob "$damaged")
rewrite_refused "gc --rewrite" "$damaged" "cannot copy blob $blob: checksum mismatch (stored bytes are damaged)"

# trajfs reads the writer's settings as trajpack create and add do: the
# same message for a bad value, before anything is mounted (the mount
# point does not exist either); and trajfs(1) describes every -o option
# that trajfs --help lists, once.
TRAJFS=$top_builddir/trajfs
refused_by_both() { # refused_by_both MOUNT_OPTION TRAJPACK_OPTION VALUE MESSAGE
    status=0
    "$TRAJFS" "$archive" "$TEST_TMP/no-mount-point" -o "$1=$3" > /dev/null 2> "$TEST_TMP/err" ||
        status=$?
    [ "$status" -ne 0 ] || fail "trajfs -o $1=$3 was accepted"
    grep -qF -- "trajfs: -o $1: $4" "$TEST_TMP/err" ||
        fail "trajfs -o $1=$3 said: $(cat "$TEST_TMP/err")"
    status=0
    "$TRAJPACK" add -q "$2" "$3" "$archive" "$TEST_TMP/note.txt" 2> "$TEST_TMP/err" || status=$?
    [ "$status" -eq 2 ] || fail "trajpack add $2 $3: status $status, expected 2"
    grep -qF -- "$2: $4" "$TEST_TMP/err" || fail "trajpack add $2 $3 said: $(cat "$TEST_TMP/err")"
}
refused_by_both max_chain --max-chain 5000 "expected a whole number from 0 to 4096, got '5000'"
refused_by_both prog_budget --budget x "expected a whole number from 1 to 4096, got 'x'"
refused_by_both threads --threads 0 "expected a whole number from 1 to 1024, got '0'"
if "$TRAJFS" "$archive" "$TEST_TMP/no-mount-point" -o all_programs=yes 2> "$TEST_TMP/err"; then
    fail "trajfs -o all_programs=yes was accepted"
fi
grep -qF "trajfs: -o all_programs: takes no value, got 'yes'" "$TEST_TMP/err" ||
    fail "trajfs -o all_programs=yes said: $(cat "$TEST_TMP/err")"
if "$TRAJFS" "$archive" "$TEST_TMP/no-mount-point" -o prefetch=lots 2> "$TEST_TMP/err"; then
    fail "trajfs -o prefetch=lots was accepted"
fi
grep -qF "trajfs: prefetch=lots: expected bytes" "$TEST_TMP/err" ||
    fail "trajfs -o prefetch=lots said: $(cat "$TEST_TMP/err")"
if "$TRAJFS" "$archive" "$TEST_TMP/no-mount-point" -o catalog_cache=1Q 2> "$TEST_TMP/err"; then
    fail "trajfs -o catalog_cache=1Q was accepted"
fi
grep -qF "trajfs: catalog_cache=1Q: expected bytes" "$TEST_TMP/err" ||
    fail "trajfs -o catalog_cache=1Q said: $(cat "$TEST_TMP/err")"
"$TRAJFS" --help > "$TEST_TMP/trajfs.help" || fail "trajfs --help failed"
sed 's/\\-/-/g' "$top_srcdir/man/trajfs.1" > "$TEST_TMP/trajfs.man"
mount_options=$(sed -n '/^libfuse options:/q; s/^    -o \([a-z0-9_]*\).*/\1/p' "$TEST_TMP/trajfs.help")
for opt in cache_size readahead prefetch threads rw spool_dir max_chain prog_budget all_programs; do
    echo "$mount_options" | grep -qx "$opt" || fail "trajfs --help does not list -o $opt"
done
for opt in $mount_options; do
    grep -q -- "-o $opt" "$TEST_TMP/trajfs.man" || fail "trajfs(1) does not describe -o $opt"
done
dup=$(echo "$mount_options" | sort | uniq -d)
[ -z "$dup" ] || fail "trajfs --help lists -o $dup more than once"

# The same on a terminal, where a progress bar would be drawn without -q
# (script(1) gives the command a pseudo-terminal; the output is all of it).
on_terminal() { # on_terminal COMMAND-LINE: prints what the terminal shows
    script -qec "$1" /dev/null < /dev/null || fail "$1 failed on a terminal"
}
rm -rf "$TEST_TMP/out" && mkdir "$TEST_TMP/out"
shown=$(on_terminal "'$TRAJPACK' add -q '$archive' '$TEST_TMP/run/step-000002.optim.safetensors' &&
                     '$TRAJPACK' extract -q '$archive' -C '$TEST_TMP/out' &&
                     '$TRAJPACK' verify -q '$archive' > /dev/null")
[ -z "$shown" ] || fail "-q runs showed on a terminal: $shown"

# ---- natural order, delta shares and references ----
# Three checkpoints whose names sort otherwise as strings (checkpoint-100
# before checkpoint-20), and a file whose name extends a directory's
# ('-' sorts before '/': a plain comparison of whole paths would put it
# between checkpoint-2/ and its contents). Chunks of 2^10 elements give
# the larger tensors several, the last one short.
nat=$TEST_TMP/nat
nat_archive=$TEST_TMP/nat.traj
mkdir -p "$nat/checkpoint-2" "$nat/checkpoint-20" "$nat/checkpoint-100"
cp "$TEST_TMP/run/bf16/step-000002.safetensors" "$nat/checkpoint-2/model.safetensors"
cp "$TEST_TMP/run/bf16/step-000004.safetensors" "$nat/checkpoint-20/model.safetensors"
cp "$TEST_TMP/run/bf16/step-000006.safetensors" "$nat/checkpoint-100/model.safetensors"
echo notes > "$nat/checkpoint-2-notes.txt"
quiet "$TRAJPACK" create -q --chunk-shift 10 "$nat_archive" "$nat"
printf '%s\n' nat/ nat/checkpoint-2/ nat/checkpoint-2/model.safetensors \
    nat/checkpoint-2-notes.txt nat/checkpoint-20/ nat/checkpoint-20/model.safetensors \
    nat/checkpoint-100/ nat/checkpoint-100/model.safetensors > "$TEST_TMP/nat.expected"
grep 'model' "$TEST_TMP/nat.expected" > "$TEST_TMP/nat.models"
"$TRAJPACK" list "$nat_archive" > "$TEST_TMP/nat.list" || fail "list failed"
cmp -s "$TEST_TMP/nat.expected" "$TEST_TMP/nat.list" ||
    fail "list is not in natural order: $(cat "$TEST_TMP/nat.list")"
"$TRAJPACK" list -l "$nat_archive" > "$TEST_TMP/nat.long" || fail "list -l failed"
grep -v '^total: ' "$TEST_TMP/nat.long" | awk '{ print $NF }' > "$TEST_TMP/nat.long.paths"
cmp -s "$TEST_TMP/nat.expected" "$TEST_TMP/nat.long.paths" ||
    fail "list -l is not in natural order: $(cat "$TEST_TMP/nat.long")"
"$TRAJPACK" stats "$nat_archive" > "$TEST_TMP/nat.stats" || fail "stats failed"
awk '/^total:$/ { rows = 0 } rows { print $NF } /^by checkpoint:$/ { rows = 1 }' \
    "$TEST_TMP/nat.stats" > "$TEST_TMP/nat.stats.paths"
cmp -s "$TEST_TMP/nat.models" "$TEST_TMP/nat.stats.paths" ||
    fail "stats lists checkpoints out of natural order: $(cat "$TEST_TMP/nat.stats")"
"$TRAJPACK" stats --json "$nat_archive" > "$TEST_TMP/nat.stats.json" || fail "stats --json failed"
"$PYTHON" -c '
import json, sys
got = [c["path"] for c in json.load(open(sys.argv[1]))["checkpoints"]]
assert got == open(sys.argv[2]).read().split(), got
' "$TEST_TMP/nat.stats.json" "$TEST_TMP/nat.models" ||
    fail "stats --json lists checkpoints out of natural order"

# list -l: the delta share of a checkpoint is the share of its tensor
# bytes in chunks with a reference blob (list --blobs: raw_len, ref), of
# all its tensor bytes (stats --tensors: bytes): 0% for the newest
# checkpoint (keyframes), more for the earlier ones (deltas against their
# successors: reverse references); "-" for a file without tensors.
"$TRAJPACK" list --blobs "$nat_archive" > "$TEST_TMP/nat.blobs" || fail "list --blobs failed"
"$TRAJPACK" stats --tensors "$nat_archive" > "$TEST_TMP/nat.tensors" ||
    fail "stats --tensors failed"
delta_shown() { # delta_shown PATH: the "delta N%" of PATH in list -l, or "none"
    awk -v p="$1" '$NF == p {
        print match($0, / delta [0-9]+% /) ? substr($0, RSTART + 1, RLENGTH - 2) : "none"
    }' "$TEST_TMP/nat.long"
}
delta_expected() { # delta_expected PATH: the same, from the blobs and tensors
    awk -F '\t' -v p="$1" '
        FILENAME == ARGV[1] && $8 == p && $6 != "-" { delta += $4 }
        FILENAME == ARGV[2] && $1 == p { total += $4 }
        END {
            pct = int(100 * delta / total + 0.5)
            if (pct == 0 && delta > 0) pct = 1
            if (pct == 100 && delta < total) pct = 99
            printf "delta %d%%\n", pct
        }' "$TEST_TMP/nat.blobs" "$TEST_TMP/nat.tensors"
}
for n in 2 20 100; do
    f=nat/checkpoint-$n/model.safetensors
    shown=$(delta_shown "$f")
    [ "$shown" = "$(delta_expected "$f")" ] ||
        fail "list -l shows '$shown' for $f, expected '$(delta_expected "$f")'"
done
[ "$(delta_shown nat/checkpoint-100/model.safetensors)" = "delta 0%" ] ||
    fail "the newest checkpoint shows deltas: $(cat "$TEST_TMP/nat.long")"
for n in 2 20; do
    case $(delta_shown nat/checkpoint-$n/model.safetensors) in
    "delta 0%" | none | "") fail "checkpoint-$n shows no deltas: $(cat "$TEST_TMP/nat.long")" ;;
    esac
done
[ "$(delta_shown nat/checkpoint-2-notes.txt)" = none ] ||
    fail "a file without tensors shows a delta share: $(cat "$TEST_TMP/nat.long")"

# stats --tensors: the reference of each tensor of checkpoint-N with
# deltas is the same tensor of the next checkpoint (reverse references:
# the first references the second, the second the third); every ulp
# tensor (always a delta) has one; the newest checkpoint has none.
awk -F '\t' '
    BEGIN {
        prev["nat/checkpoint-2/model.safetensors"] = "nat/checkpoint-20/model.safetensors"
        prev["nat/checkpoint-20/model.safetensors"] = "nat/checkpoint-100/model.safetensors"
    }
    NF != 9 { print "fields: " $0; exit 1 }
    $1 == "nat/checkpoint-100/model.safetensors" && ($8 != "-" || $9 != "-") {
        print "a reference in the newest checkpoint: " $0; exit 1
    }
    $6 ~ /ulp/ && $8 == "-" { print "a delta without a reference: " $0; exit 1 }
    $8 != "-" && ($8 != prev[$1] || $9 != $2) { print "another reference: " $0; exit 1 }
    $8 != "-" { refs[$1]++ }
    END {
        for (f in prev)
            if (!refs[f]) { print "no references in " f; exit 1 }
    }' "$TEST_TMP/nat.tensors" > "$TEST_TMP/nat.why" ||
    fail "stats --tensors: $(cat "$TEST_TMP/nat.why")"
"$TRAJPACK" stats --tensors --json "$nat_archive" > "$TEST_TMP/nat.tensors.json" ||
    fail "stats --tensors --json failed"
"$PYTHON" -m json.tool "$TEST_TMP/nat.tensors.json" > /dev/null ||
    fail "stats --tensors --json is not JSON"
"$PYTHON" -c '
import json, sys
tensors = json.load(open(sys.argv[1]))["tensors"]
files = []
for x in tensors:
    if not files or files[-1] != x["file"]:
        files.append(x["file"])
assert files == open(sys.argv[2]).read().split(), files
# reverse references (trajpack(1), REFERENCE CHAINS): file i
# references file i + 1, the newest none
prev = {f: files[i + 1] for i, f in enumerate(files[:-1])}
refs = 0
for x in tensors:
    r = x["reference"]
    assert r is None or x["file"] != files[-1], x
    assert r is not None or "ulp" not in x["chunks"], x
    if r is not None:
        assert set(r) == {"blob", "file", "tensor"} and isinstance(r["blob"], int), r
        assert r["file"] == prev[x["file"]] and r["tensor"] == x["tensor"], x
        refs += 1
assert refs, "no references"
' "$TEST_TMP/nat.tensors.json" "$TEST_TMP/nat.models" ||
    fail "stats --tensors --json: bad references"

# A reference whose file was replaced is in no file any more, so the
# chunks that used it are encoded again against the nearest chunk of a
# kept file down their chain (checkpoint-2 referenced checkpoint-20, which
# referenced checkpoint-100): every reference of checkpoint-2 then names
# checkpoint-100, none a file that is gone ("?" and "-"; null in JSON).
# The float32 replacement of a bfloat16 checkpoint finds no reference in
# its run: stored, with a warning.
"$TRAJPACK" add -q "$nat_archive" "$TEST_TMP/run/fp32/step-000004.safetensors" \
    --as nat/checkpoint-20/model.safetensors 2> "$TEST_TMP/err" || fail "add of the replacement failed"
grep -q "^trajpack: warning: nat/checkpoint-20/model.safetensors: references found for 0% of its float tensor bytes" \
    "$TEST_TMP/err" || fail "add of an unmatched checkpoint did not warn: $(cat "$TEST_TMP/err")"
"$TRAJPACK" stats --tensors "$nat_archive" nat/checkpoint-2 > "$TEST_TMP/nat.gone" ||
    fail "stats --tensors failed"
awk -F '\t' '$6 ~ /ulp/ && $8 != "nat/checkpoint-100/model.safetensors" { exit 1 }' "$TEST_TMP/nat.gone" &&
    grep -q "$(printf '\tnat/checkpoint-100/model.safetensors\t')" "$TEST_TMP/nat.gone" ||
    fail "stats --tensors names a replaced file as reference: $(cat "$TEST_TMP/nat.gone")"
"$TRAJPACK" stats --tensors --json "$nat_archive" nat/checkpoint-2 > "$TEST_TMP/nat.gone.json" ||
    fail "stats --tensors --json failed"
"$PYTHON" -c '
import json, sys
refs = [x["reference"] for x in json.load(open(sys.argv[1]))["tensors"] if x["reference"]]
assert refs and all(r["file"] == "nat/checkpoint-100/model.safetensors" for r in refs), refs
' "$TEST_TMP/nat.gone.json" || fail "stats --tensors --json names a replaced file as reference"
"$TRAJPACK" verify -q "$nat_archive" || fail "verify after the rebase failed"

# ---- a file that looks like a tensor file but is not one --------------------
# Not named *.safetensors, so it is stored as opaque bytes, byte-identical;
# stats says why it is not stored per tensor.
odd=$TEST_TMP/odd.bin
printf '\021\000\000\000\000\000\000\000{"w":{"dtype":"F3' > "$odd"
odd_archive=$TEST_TMP/odd.traj
quiet "$TRAJPACK" create -q "$odd_archive" "$odd"
"$TRAJPACK" extract -q -O "$odd_archive" odd.bin | cmp - "$odd" || fail "odd.bin differs"
"$TRAJPACK" stats "$odd_archive" > "$TEST_TMP/odd.stats" || fail "stats of odd.traj failed"
grep -q "^files: 0 safetensors, .* 1 other;" "$TEST_TMP/odd.stats" ||
    fail "odd.bin is not counted as an other file: $(cat "$TEST_TMP/odd.stats")"
grep -q "^note: odd.bin: " "$TEST_TMP/odd.stats" ||
    fail "stats gives no note for odd.bin: $(cat "$TEST_TMP/odd.stats")"
"$TRAJPACK" stats --json "$odd_archive" > "$TEST_TMP/odd.json" || fail "stats --json failed"
"$PYTHON" -c '
import json, sys
notes = json.load(open(sys.argv[1]))["notes"]
assert len(notes) == 1 and notes[0]["path"] == "odd.bin" and notes[0]["note"], notes
' "$TEST_TMP/odd.json" || fail "stats --json has no note for odd.bin"
exit 0
