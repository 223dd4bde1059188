#!/bin/sh
# Retention: removing checkpoints gives their space back and leaves the
# rest whole. On a run of 16 checkpoints with optimizer state (steps 10
# to 160), removed with remove_paths (retentionlib.sh: rm through a
# writable mount):
# 1. every checkpoint but every 4th (40, 80, 120, 160): the kept files
#    extract byte-identical, verify passes, the archive holds fewer bytes
#    than before, no chunk of a kept file is left a delta against a
#    removed one, list and stats show the removed files gone; gc then
#    holds no more, and a second gc has nothing to re-encode and changes
#    nothing.
# 2. the oldest checkpoint, then the newest (the chains run both ways:
#    deltas against a newer checkpoint and a newer one's against older
#    ones): each time the rest byte-identical, verify, fewer bytes held.
# 3. overwriting through the mount gives the old content's space back:
#    a file of random bytes replaced by other random bytes of the same
#    size holds about as much as before, not twice; a checkpoint's
#    optimizer state replaced by a small file holds less than before.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/retentionlib.sh"

src=$TEST_TMP/src
generate_retention_run "$src/run"
steps=$(cd "$src/run" && ls step-*.optim.safetensors | sed 's/^step-\([0-9]*\)\..*/\1/')
[ "$(echo "$steps" | wc -w)" -eq 16 ] || fail "the run has $(echo "$steps" | wc -w) checkpoints, not 16"
full=$TEST_TMP/full.traj
"$TRAJPACK" create -q "$full" "$src/run" || fail "create failed"
live_files "$full" > "$TEST_TMP/all.list"

# ckpt STEP: the archive paths of a checkpoint's two files.
ckpt() {
    printf 'run/step-%s.safetensors\nrun/step-%s.optim.safetensors\n' "$1" "$1"
}

# check_kept ARCHIVE KEPT WHAT: the archive lists exactly the paths of
# the file KEPT, each extracts byte-identical to its source, and verify
# passes.
check_kept() {
    live_files "$1" > "$TEST_TMP/listed"
    LC_ALL=C sort "$2" | cmp -s - "$TEST_TMP/listed" ||
        { diff "$2" "$TEST_TMP/listed" >&2; fail "$3: the archive lists other files"; }
    "$TRAJPACK" verify -q "$1" > "$TEST_TMP/verify" 2> "$TEST_TMP/err" ||
        fail "$3: verify failed: $(cat "$TEST_TMP/err")"
    extract_all "$1" "$TEST_TMP/out"
    while IFS= read -r _p; do
        cmp "$TEST_TMP/out/$_p" "$src/$_p" || fail "$3: $_p differs"
    done < "$2"
    [ "$(find "$TEST_TMP/out" -type f | wc -l)" -eq "$(wc -l < "$2")" ] ||
        fail "$3: extract wrote other files"
}

# ---- 1. every 4th kept ---------------------------------------------------------------

archive=$TEST_TMP/a.traj
cp "$full" "$archive"
: > "$TEST_TMP/removed"
i=0
for s in $steps; do
    i=$((i + 1))
    [ $((i % 4)) -eq 0 ] || ckpt "$s" >> "$TEST_TMP/removed"
done
grep -vxFf "$TEST_TMP/removed" "$TEST_TMP/all.list" > "$TEST_TMP/kept"
[ "$(wc -l < "$TEST_TMP/kept")" -eq 9 ] || fail "expected 8 checkpoint files and config.json kept"
before=$(held "$archive")
# shellcheck disable=SC2046
remove_paths "$archive" $(cat "$TEST_TMP/removed")
after=$(held "$archive")
check_kept "$archive" "$TEST_TMP/kept" "every 4th kept"
[ "$after" -lt "$before" ] || fail "every 4th kept: $after bytes held, $before before the removal"
pending=$(pending_rebases "$archive")
[ "$pending" -eq 0 ] || fail "every 4th kept: $pending chunks are deltas against removed ones"
"$TRAJPACK" list "$archive" > "$TEST_TMP/list"
"$TRAJPACK" stats "$archive" > "$TEST_TMP/stats" || fail "stats failed"
while IFS= read -r p; do
    ! grep -qF "$p" "$TEST_TMP/list" || fail "list shows the removed $p"
    ! grep -qF "$p" "$TEST_TMP/stats" || fail "stats shows the removed $p"
done < "$TEST_TMP/removed"
grep -q '^files: 8 safetensors, 0 torch.save, 1 other' "$TEST_TMP/stats" ||
    fail "stats counts: $(grep '^files:' "$TEST_TMP/stats")"
# A fresh archive of the kept files, for the figures.
mkdir -p "$TEST_TMP/kept.tree/run"
while IFS= read -r p; do
    cp -p "$src/$p" "$TEST_TMP/kept.tree/$p"
done < "$TEST_TMP/kept"
(cd "$TEST_TMP/kept.tree" && "$TRAJPACK" create -q "$TEST_TMP/fresh.traj" run) || fail "create of the kept files failed"
echo "$TEST_NAME: every 4th kept: $before -> $after bytes held (a fresh archive of the kept files: $(held "$TEST_TMP/fresh.traj"))"

"$TRAJPACK" gc -q "$archive" > "$TEST_TMP/gc.out" 2>&1 || fail "gc failed: $(cat "$TEST_TMP/gc.out")"
gc=$(held "$archive")
[ "$gc" -le "$after" ] || fail "gc: $gc bytes held, $after before it"
check_kept "$archive" "$TEST_TMP/kept" "after gc"
cp "$archive" "$TEST_TMP/gc1.traj"
"$TRAJPACK" gc "$archive" > "$TEST_TMP/gc.out" 2>&1 || fail "a second gc failed: $(cat "$TEST_TMP/gc.out")"
grep -q '^gc: .* on disk$' "$TEST_TMP/gc.out" && ! grep -q 'encoded again' "$TEST_TMP/gc.out" ||
    fail "a second gc said: $(cat "$TEST_TMP/gc.out")"
cmp -s "$archive" "$TEST_TMP/gc1.traj" || fail "a second gc, with nothing to collect, changed the archive"
[ "$(held "$archive")" -le "$gc" ] || fail "a second gc made the archive hold more"
echo "$TEST_NAME: every 4th kept: gc -> $gc bytes held"

# ---- 2. the oldest, then the newest ---------------------------------------------

archive=$TEST_TMP/b.traj
cp "$full" "$archive"
cp "$TEST_TMP/all.list" "$TEST_TMP/kept"
oldest=$(echo "$steps" | head -n 1)
newest=$(echo "$steps" | tail -n 1)
for s in "$oldest" "$newest"; do
    ckpt "$s" > "$TEST_TMP/removed"
    grep -vxFf "$TEST_TMP/removed" "$TEST_TMP/kept" > "$TEST_TMP/kept.next"
    mv "$TEST_TMP/kept.next" "$TEST_TMP/kept"
    before=$(held "$archive")
    # shellcheck disable=SC2046
    remove_paths "$archive" $(cat "$TEST_TMP/removed")
    after=$(held "$archive")
    check_kept "$archive" "$TEST_TMP/kept" "step $s removed"
    [ "$after" -lt "$before" ] || fail "step $s removed: $after bytes held, $before before"
    pending=$(pending_rebases "$archive")
    [ "$pending" -eq 0 ] || fail "step $s removed: $pending chunks are deltas against removed ones"
    echo "$TEST_NAME: step $s removed: $before -> $after bytes held"
done

# ---- 3. overwriting ----------------------------------------------------------------------

head -c 1048576 /dev/urandom > "$TEST_TMP/r1"
head -c 1048576 /dev/urandom > "$TEST_TMP/r2"
"$TRAJPACK" add -q --as run/random.bin "$archive" "$TEST_TMP/r1" || fail "add failed"
with_r1=$(held "$archive")
start_mount "$archive" "$RM_MNT" -o rw
cp "$TEST_TMP/r2" "$RM_MNT/run/random.bin"
stop_mount "$RM_MNT"
quiet_daemon "$RM_MNT.log"
with_r2=$(held "$archive")
"$TRAJPACK" extract -q "$archive" run/random.bin -O | cmp -s - "$TEST_TMP/r2" ||
    fail "random.bin does not read back as written"
# Without the old bytes given back, the archive would hold 1 MiB more.
[ $((with_r2 - with_r1)) -lt 524288 ] ||
    fail "1 MiB of random bytes overwritten: $with_r1 -> $with_r2 bytes held"
echo "$TEST_NAME: 1 MiB of random bytes overwritten through the mount: $with_r1 -> $with_r2 bytes held"

# A checkpoint's optimizer state replaced by its weights (smaller).
victim=run/step-$(echo "$steps" | sed -n 8p).optim.safetensors
weights=run/step-$(echo "$steps" | sed -n 8p).safetensors
before=$(held "$archive")
start_mount "$archive" "$RM_MNT" -o rw
cp "$src/$weights" "$RM_MNT/$victim"
stop_mount "$RM_MNT"
quiet_daemon "$RM_MNT.log"
after=$(held "$archive")
cp "$src/$weights" "$TEST_TMP/new-content"
"$TRAJPACK" extract -q "$archive" "$victim" -O | cmp -s - "$TEST_TMP/new-content" ||
    fail "$victim does not read back as written"
[ "$after" -lt "$before" ] || fail "$victim overwritten with a smaller file: $before -> $after bytes held"
"$TRAJPACK" verify -q "$archive" > /dev/null 2> "$TEST_TMP/err" ||
    fail "verify after the overwrites failed: $(cat "$TEST_TMP/err")"
extract_all "$archive" "$TEST_TMP/out"
while IFS= read -r p; do
    [ "$p" = "$victim" ] && continue
    cmp "$TEST_TMP/out/$p" "$src/$p" || fail "after the overwrites: $p differs"
done < "$TEST_TMP/kept"
echo "$TEST_NAME: $victim overwritten through the mount: $before -> $after bytes held"
exit 0
