#!/bin/sh
# Python on the mount: numpy maps every checkpoint (mmap through FUSE),
# parses its header and compares every tensor with the original, bit for
# bit; the example loader (examples/mount/load_checkpoint.py) gives the
# same tensors from the mount as from the original, with numpy and torch.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

"$PYTHON" -c 'import numpy' 2> /dev/null || fail "$PYTHON cannot import numpy (apt-get install python3-numpy)"

src=$TEST_TMP/src
generate_run "$src/run"
cp -pR "$top_srcdir/examples/tiny-run" "$src/tiny-run"
make_safetensors good "$src/handmade"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q --chunk-shift 12 "$archive" "$src/run" "$src/tiny-run" "$src/handmade" ||
    fail "create failed"
mnt=$TEST_TMP/mnt

start_mount "$archive" "$mnt"
"$PYTHON" "$top_srcdir/tests/tools/npcheck.py" "$src" "$mnt" > "$TEST_TMP/npcheck.out" ||
    fail "numpy sees other tensors through the mount"
grep -q "^npcheck: $(find "$src" -name '*.safetensors' | wc -l) checkpoints" "$TEST_TMP/npcheck.out" ||
    fail "npcheck checked other files: $(cat "$TEST_TMP/npcheck.out")"

loader=$top_srcdir/examples/mount/load_checkpoint.py
ckpt=run/step-000020.safetensors
for lib in "" --torch; do
    "$PYTHON" "$loader" $lib "$src/$ckpt" > "$TEST_TMP/want" || fail "loader $lib failed on the original"
    "$PYTHON" "$loader" $lib "$mnt/$ckpt" > "$TEST_TMP/got" || fail "loader $lib failed on the mount"
    [ -s "$TEST_TMP/got" ] || fail "loader $lib printed nothing"
    cmp -s "$TEST_TMP/want" "$TEST_TMP/got" ||
        { diff "$TEST_TMP/want" "$TEST_TMP/got" >&2; fail "loader $lib sees other tensors in the mount"; }
done
stop_mount "$mnt"
exit 0
