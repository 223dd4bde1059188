#!/bin/sh
# Deduplication: blobs are content addressed, so adding a checkpoint again
# under another name stores no tensor data (only its catalog entry), and
# the tied copy lm_head.weight = transformer.wte.weight is one blob.
set -eu
. "$(dirname "$0")/lib.sh"

# A checkpoint of 0.8 MB: the catalog entry of a file (its path and
# verbatim safetensors header, about 2 kB before compression) is a fixed
# cost that the tiny trajectory's 40 kB files would not dwarf.
traj=$TEST_TMP/traj
generate_trajectory "$traj" --layers 2 --width 128 --heads 2 --ctx 16 --batch 2 \
    --steps 2 --interval 2 --max-chars 20000 --dtype bf16
ckpt=$traj/step-000002.safetensors
archive=$TEST_TMP/a.traj

"$TRAJPACK" create -q "$archive" "$ckpt" || fail "create failed"
size_once=$(file_size "$archive")
"$TRAJPACK" list --blobs "$archive" > "$TEST_TMP/blobs.once"
"$TRAJPACK" add -q --as again/copy.safetensors "$archive" "$ckpt" || fail "add failed"
size_twice=$(file_size "$archive")
growth=$((size_twice - size_once))
limit=$(($(file_size "$ckpt") / 100))
[ "$growth" -lt "$limit" ] ||
    fail "adding the checkpoint again grew the archive by $growth bytes (limit: 1% = $limit)"

# The copy uses exactly the original's blobs, and no blob was added.
"$TRAJPACK" list --blobs "$archive" > "$TEST_TMP/blobs.twice"
chunks_of() { # chunks_of PATH FILE: blob, tensor and chunk of each use
    awk -F '\t' -v p="$1" '$8 == p { print $1 "\t" $9 "\t" $10 }' "$2"
}
chunks_of step-000002.safetensors "$TEST_TMP/blobs.once" > "$TEST_TMP/orig"
chunks_of again/copy.safetensors "$TEST_TMP/blobs.twice" > "$TEST_TMP/copy"
[ -s "$TEST_TMP/orig" ] || fail "list --blobs shows no chunks of the checkpoint"
cmp -s "$TEST_TMP/orig" "$TEST_TMP/copy" || fail "the copy does not reuse the original's blobs"
blob_count() { grep -v '^#' "$1" | cut -f1 | sort -u | wc -l; }
[ "$(blob_count "$TEST_TMP/blobs.once")" -eq "$(blob_count "$TEST_TMP/blobs.twice")" ] ||
    fail "adding the same checkpoint again stored new blobs"
"$TRAJPACK" list -l "$archive" again/copy.safetensors > "$TEST_TMP/long"
grep -q ' 0 B .* dedup .*again/copy\.safetensors$' "$TEST_TMP/long" ||
    fail "list -l does not show the copy as deduplicated: $(cat "$TEST_TMP/long")"

# The tied head is the embedding's blob, chunk for chunk.
tensor_blobs() { # tensor_blobs NAME: the blobs of one tensor of the original
    awk -F '\t' -v t="\"$1\"" '$8 == "step-000002.safetensors" && $9 == t { print $1 }' \
        "$TEST_TMP/blobs.once"
}
tensor_blobs transformer.wte.weight > "$TEST_TMP/wte"
tensor_blobs lm_head.weight > "$TEST_TMP/head"
[ -s "$TEST_TMP/wte" ] || fail "no transformer.wte.weight in the checkpoint"
cmp -s "$TEST_TMP/wte" "$TEST_TMP/head" ||
    fail "lm_head.weight is not stored as transformer.wte.weight's blob"

"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed"
"$TRAJPACK" extract -q "$archive" again/copy.safetensors -O | cmp - "$ckpt" ||
    fail "the copy does not extract byte-identical"
exit 0
