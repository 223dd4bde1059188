#!/bin/sh
# Crash safety and damage containment.
# 1. An archive cut anywhere inside its last commit (a crash, a full disk)
#    opens as the commit before: `list` shows exactly its files and
#    `verify` passes; `add` to such an archive continues from there. (The
#    bytes before the commit are as they were: the keyframes it re-encodes
#    are given back only once it is durable, trajfs(5).)
# 2. One flipped bit inside one tensor's stored bytes: `verify` exits 1 and
#    names exactly that tensor; every other file extracts byte-identical.
set -eu
. "$(dirname "$0")/lib.sh"

traj=$TEST_TMP/traj
archive=$TEST_TMP/a.traj
generate_tiny_trajectory "$traj"

# One commit per `trajpack add`; remember the archive and its listing
# before the last.
"$TRAJPACK" create -q "$archive" "$traj/config.json" || fail "create failed"
before=$TEST_TMP/before.traj
for step in 2 4 6; do
    prev_size=$(file_size "$archive")
    "$TRAJPACK" list "$archive" > "$TEST_TMP/prev.list"
    cp "$archive" "$before"
    "$TRAJPACK" add -q "$archive" "$traj/bf16/step-00000$step.safetensors" ||
        fail "add of step $step failed"
done
end_size=$(file_size "$archive")
"$TRAJPACK" list "$archive" > "$TEST_TMP/full.list"
[ "$end_size" -gt "$((prev_size + 200))" ] || fail "the last commit is too small to cut"
cmp -s "$TEST_TMP/prev.list" "$TEST_TMP/full.list" && fail "the last add changed no listing"

# ---- 1. torn last commit -----------------------------------------------------

# The archive as a crash after its first POS bytes leaves it: the bytes
# before the last commit as they were then, and the start of the commit.
tail -c +$((prev_size + 1)) "$archive" > "$TEST_TMP/last"
torn_at() { # POS
    { cat "$before"; head -c $(($1 - prev_size)) "$TEST_TMP/last"; } > "$cut"
}

# 200 cut positions from the end of the previous commit to one byte short
# of the end of the file.
positions=$(awk -v a="$prev_size" -v b="$end_size" \
    'BEGIN { for (k = 0; k < 199; k++) print a + int(k * (b - a) / 199); print b - 1 }')
cut=$TEST_TMP/cut.traj
count=0
for pos in $positions; do
    torn_at "$pos"
    "$TRAJPACK" list "$cut" > "$TEST_TMP/cut.list" 2> "$TEST_TMP/err" ||
        fail "cut at $pos: list failed: $(cat "$TEST_TMP/err")"
    cmp -s "$TEST_TMP/prev.list" "$TEST_TMP/cut.list" ||
        fail "cut at $pos: lists $(tr '\n' ' ' < "$TEST_TMP/cut.list")"
    "$TRAJPACK" verify -q "$cut" > "$TEST_TMP/verify" 2> "$TEST_TMP/err" ||
        fail "cut at $pos: verify failed: $(cat "$TEST_TMP/err")"
    count=$((count + 1))
done
[ "$count" -eq 200 ] || fail "tried $count cut positions, not 200"

# Adding to a torn archive drops the torn tail and goes on.
torn_at $(((prev_size + end_size) / 2))
"$TRAJPACK" add -q "$cut" "$traj/bf16/step-000006.safetensors" || fail "add to a torn archive failed"
"$TRAJPACK" list "$cut" | cmp -s - "$TEST_TMP/full.list" || fail "add to a torn archive lists other files"
"$TRAJPACK" verify -q "$cut" > /dev/null || fail "verify after adding to a torn archive failed"

# ---- 2. one flipped bit --------------------------------------------------------

# A blob of the first checkpoint (deltas against the next: reverse
# references) that only one tensor uses and that no blob depends on (as
# reference or model): the largest such one.
"$TRAJPACK" list --blobs "$archive" > "$TEST_TMP/blobs" || fail "list --blobs failed"
target=step-000002.safetensors
victim=$(awk -F '\t' -v target="$target" '
    NR == 1 { next }
    { uses[$1]++; if ($6 != "-") needed[$6] = 1; if ($7 != "-") needed[$7] = 1
      if ($8 == target && $9 != "-") { cand[$1] = $2 "\t" $3 "\t" $9 } }
    END {
        best = -1
        for (b in cand) {
            split(cand[b], f, "\t")
            if (uses[b] == 1 && !(b in needed) && f[2] + 0 > best) { best = f[2] + 0; pick = cand[b] }
        }
        if (best >= 16) print pick
    }' "$TEST_TMP/blobs")
[ -n "$victim" ] || fail "no blob of $target to damage in: $(cat "$TEST_TMP/blobs")"
offset=$(printf '%s\n' "$victim" | cut -f1)
enc_len=$(printf '%s\n' "$victim" | cut -f2)
tensor=$(printf '%s\n' "$victim" | cut -f3) # JSON-quoted, as verify prints it

damaged=$TEST_TMP/damaged.traj
cp "$archive" "$damaged"
"$PYTHON" - "$damaged" "$((offset + enc_len / 2))" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at)
    byte = f.read(1)[0]
    f.seek(at)
    f.write(bytes([byte ^ 0x08]))
PY
cmp -s "$archive" "$damaged" && fail "the bit flip changed nothing"

status=0
"$TRAJPACK" verify -q "$damaged" > "$TEST_TMP/verify" 2> "$TEST_TMP/err" || status=$?
[ "$status" -eq 1 ] || fail "verify of a damaged archive exited $status, expected 1"
grep -qF "$target: tensor $tensor" "$TEST_TMP/err" ||
    fail "verify does not name tensor $tensor of $target: $(cat "$TEST_TMP/err")"
[ "$(wc -l < "$TEST_TMP/err")" -eq 1 ] ||
    fail "verify names more than the damaged tensor: $(cat "$TEST_TMP/err")"
grep -q '1 bad blobs in 1 files$' "$TEST_TMP/verify" ||
    fail "verify summary: $(cat "$TEST_TMP/verify")"

# Every other file extracts byte-identical; the damaged one is not written.
out=$TEST_TMP/out
mkdir "$out"
status=0
"$TRAJPACK" extract -q "$damaged" -C "$out" 2> "$TEST_TMP/err" || status=$?
[ "$status" -eq 1 ] || fail "extract of a damaged archive exited $status, expected 1"
grep -qF "$target: tensor $tensor" "$TEST_TMP/err" ||
    fail "extract does not name the damaged tensor: $(cat "$TEST_TMP/err")"
[ ! -e "$out/$target" ] || fail "extract left the damaged file behind"
cmp "$traj/config.json" "$out/config.json" || fail "config.json differs"
for step in 4 6; do
    cmp "$traj/bf16/step-00000$step.safetensors" "$out/step-00000$step.safetensors" ||
        fail "step $step differs"
done
status=0
"$TRAJPACK" extract -q "$damaged" "$target" -O > /dev/null 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "extract -O of the damaged file exited $status, expected 1"

exit 0
