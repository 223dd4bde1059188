#!/bin/sh
# Tools writing into the writable mount: rsync (a temporary name, then a
# rename) gives the same files, its checkpoints still stored as deltas,
# and a second rsync finds nothing to do; a Python training loop writing
# step-N.safetensors straight into the mount gives the same bytes as on
# disk; an invalid safetensors file fails its close with EINVAL and is
# not stored; other bytes are stored as they are; -o max_chain bounds
# every delta chain, as trajpack add --max-chain does; -o all_programs
# gives programs to tensors with a reference.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

command -v rsync > /dev/null || fail "rsync not found (apt-get install rsync)"

src=$TEST_TMP/src
generate_tiny_trajectory "$src/run"
mkdir "$src/py"
"$PYTHON" "$WRITE_CHECKPOINTS" "$src/py" 1 6 || fail "write_checkpoints.py failed"
archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt
start_mount "$archive" "$mnt" -o rw,max_chain=2

# ---- rsync ----
rsync -a "$src/run" "$mnt/" || fail "rsync into the mount failed"
diff -r "$src/run" "$mnt/run" > /dev/null || fail "rsync gives other files"
[ -z "$(rsync -ai "$src/run" "$mnt/")" ] || fail "a second rsync finds changes: $(rsync -ain "$src/run" "$mnt/")"
[ "$(stat -c '%a %Y' "$mnt/run/bf16/step-000004.safetensors")" = \
  "$(stat -c '%a %Y' "$src/run/bf16/step-000004.safetensors")" ] || fail "rsync -a lost mode or time"

# ---- a Python training loop ----
mkdir "$mnt/py"
"$PYTHON" "$WRITE_CHECKPOINTS" --fsync "$mnt/py" 1 6 || fail "writing checkpoints into the mount failed"
diff -r "$src/py" "$mnt/py" > /dev/null || fail "the checkpoints written through the mount differ"
"$PYTHON" "$top_srcdir/tests/tools/npcheck.py" "$src/py" "$mnt/py" > /dev/null ||
    fail "numpy sees other tensors in the checkpoints written through the mount"

# ---- what is not a safetensors file ----
"$PYTHON" - "$mnt" <<'PY' || fail "invalid files (above)"
import errno, os, sys
mnt = sys.argv[1]
bad = os.path.join(mnt, "bad.safetensors")
f = open(bad, "wb")
f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
try:
    f.close()
    sys.exit("an invalid safetensors file closed without an error")
except OSError as e:
    assert e.errno == errno.EINVAL, "close gave %s, not EINVAL" % e
assert not os.path.exists(bad), "the invalid safetensors file was stored"
other = os.path.join(mnt, "bad.bin")
with open(other, "wb") as f:
    f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
assert open(other, "rb").read().startswith(b"\x10"), "an opaque file reads other bytes"
PY
stop_mount "$mnt"

# ---- the archive ----
"$TRAJPACK" verify -q "$archive" > /dev/null || fail "verify failed"
"$TRAJPACK" list -l "$archive" > "$TEST_TMP/list"
# The rsync'd checkpoints were encoded under their temporary names as
# checkpoints of the run of their final names: each but the newest
# became deltas against the next (reverse references).
grep 'run/bf16/step-000004.safetensors' "$TEST_TMP/list" | grep -q ulp ||
    fail "rsync'd checkpoints are not stored as deltas: $(cat "$TEST_TMP/list")"
grep 'py/step-5.safetensors' "$TEST_TMP/list" | grep -q ulp ||
    fail "checkpoints written by Python are not stored as deltas: $(cat "$TEST_TMP/list")"
! grep -q 'bad.safetensors' "$TEST_TMP/list" || fail "the invalid file is listed"
depth=$(max_chain_depth "$archive")
[ "$depth" -le 2 ] || fail "-o max_chain=2 let a chain of $depth deltas through"
[ "$depth" -ge 1 ] || fail "no deltas at all"
mkdir "$TEST_TMP/out"
"$TRAJPACK" extract -q "$archive" -C "$TEST_TMP/out" || fail "extract failed"
diff -r "$src/run" "$TEST_TMP/out/run" > /dev/null && diff -r "$src/py" "$TEST_TMP/out/py" > /dev/null ||
    fail "extract gives other files"

# trajpack add obeys the same bound.
"$TRAJPACK" create -q --max-chain 1 "$TEST_TMP/b.traj" "$src/py" || fail "create failed"
depth=$(max_chain_depth "$TEST_TMP/b.traj")
[ "$depth" -eq 1 ] || fail "trajpack create --max-chain 1 made chains of $depth deltas"

# -o all_programs reaches the writer: the AdamW state of the example's
# step 4, written after step 6 (out of order: deltas against step 6, where
# many lose), is stored as programs (with the search alone it is partly
# bytegroup), and reads back the same. (The newest checkpoint's keyframes get no
# program search: the next checkpoint re-encodes them.)
tiny=$top_srcdir/examples/tiny-run
start_mount "$TEST_TMP/c.traj" "$TEST_TMP/mnt2" -o rw,all_programs
mkdir "$TEST_TMP/mnt2/tiny-run"
for f in step-000006.optim.safetensors step-000004.optim.safetensors; do
    cp "$tiny/$f" "$TEST_TMP/mnt2/tiny-run/" || fail "cp of $f into the all_programs mount failed"
    cmp "$tiny/$f" "$TEST_TMP/mnt2/tiny-run/$f" || fail "the all_programs mount gives another $f"
done
stop_mount "$TEST_TMP/mnt2"
"$TRAJPACK" list -l "$TEST_TMP/c.traj" > "$TEST_TMP/list"
line=$(grep 'step-000004.optim.safetensors' "$TEST_TMP/list")
case $line in
*bytegroup*) fail "-o all_programs left bytegroup chunks: $line" ;;
*prog*) ;;
*) fail "-o all_programs stored no programs: $line" ;;
esac
exit 0
