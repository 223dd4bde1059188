#!/bin/sh
# A damaged blob (one byte flipped in its payload): reads of the tensor it
# belongs to fail with EIO and one log line names the file and the tensor,
# however often they are tried; the header, every other tensor and every
# other file read as the originals.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

src=$TEST_TMP/src
generate_run "$src/run"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run" || fail "create failed"
victim=run/step-000020.safetensors

# The largest blob that only one tensor of the last checkpoint uses (no
# other file, and no delta or model refers to it).
"$TRAJPACK" list --blobs "$archive" > "$TEST_TMP/blobs" || fail "list --blobs failed"
set -- $(awk -F'\t' -v f="$victim" '
    NR > 1 { uses[$1]++; refd[$6] = 1; refd[$7] = 1
             if ($8 == f && $9 != "-") { off[$1] = $2; len[$1] = $3; name[$1] = $9 } }
    END { for (b in off)
              if (uses[b] == 1 && !(b in refd) && len[b] > best) { best = len[b]; pick = b }
          gsub(/"/, "", name[pick]); print off[pick], len[pick], name[pick] }' "$TEST_TMP/blobs")
[ $# = 3 ] || fail "no blob of $victim to damage in: $(head -5 "$TEST_TMP/blobs")"
at=$(($1 + $2 / 2)) tensor=$3
byte=$(od -An -tu1 -j "$at" -N1 "$archive" | tr -d ' ')
printf "\\$(printf %03o $((byte ^ 0xff)))" | dd of="$archive" bs=1 seek="$at" conv=notrunc 2> /dev/null
mnt=$TEST_TMP/mnt

# Exact reads: every pread reaches trajfs with its own range.
start_mount "$archive" "$mnt" -o direct_io
for _ in 1 2 3; do
    "$PYTHON" "$top_srcdir/tests/tools/eiocheck.py" "$src/$victim" "$mnt/$victim" "$tensor" ||
        fail "reads around the damaged tensor $tensor"
done
for f in "$src"/run/*; do
    [ "run/${f##*/}" = "$victim" ] || cmp "$f" "$mnt/run/${f##*/}" || fail "${f##*/} differs"
done
stop_mount "$mnt"
grep -F "$victim" "$mnt.log" > "$TEST_TMP/errors" || true
[ "$(wc -l < "$TEST_TMP/errors")" = 1 ] ||
    fail "expected one log line about $victim, got: $(cat "$mnt.log")"
grep -F "tensor \"$tensor\"" "$TEST_TMP/errors" | grep -q 'checksum' ||
    fail "the log line does not name the tensor and the checksum: $(cat "$TEST_TMP/errors")"

# Through the page cache: the file fails to read as a whole, the others
# read as they are.
start_mount "$archive" "$mnt"
if cat "$mnt/$victim" > /dev/null 2> "$TEST_TMP/err"; then fail "read the damaged file without error"; fi
grep -q 'Input/output error' "$TEST_TMP/err" || fail "cat said: $(cat "$TEST_TMP/err")"
for f in "$src"/run/*; do
    [ "run/${f##*/}" = "$victim" ] || cmp "$f" "$mnt/run/${f##*/}" || fail "${f##*/} differs"
done
stop_mount "$mnt"
exit 0
