#!/bin/sh
# The Python package (python/, `import trajfs`) without a mount, on an
# archive of the test generator's run, torch.save files of a trainer's
# layout, the sharded layout of transformers (an index and its shards),
# odd torch.save files (every dtype, the legacy format, views)
# and hand-made safetensors files of every dtype: every call of
# its API against the original files (tests/python/test_api.py, bytes
# and tensors exact), the same archive over loopback HTTP, a damaged
# archive, and writing.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

pkg=$top_srcdir/python
ls "$pkg"/trajfs/_trajfs*.so > /dev/null 2>&1 || {
    echo "SKIP: $TEST_NAME: the Python extension is not built (configure found no" \
         "python3-dev for $PYTHON; apt-get install python3-dev and configure again)"
    exit 77
}
for module in numpy torch fsspec; do
    "$PYTHON" -c "import $module" 2> /dev/null ||
        fail "$PYTHON cannot import $module (sh .ci/install-deps --tests)"
done

src=$TEST_TMP/src
generate_trajectory "$src/run" --layers 2 --width 64 --heads 2 --ctx 32 --batch 2 \
    --steps 12 --interval 4 --max-chars 20000 --dtype bf16,fp32 --optimizer
"$PYTHON" "$top_srcdir/tests/tools/make_torch_files.py" trainer "$src/trainer" "$src/run" ||
    fail "make_torch_files.py failed"
"$PYTHON" "$top_srcdir/tests/tools/make_torch_files.py" odd "$src/odd" ||
    fail "make_torch_files.py odd failed"
make_safetensors good "$src/handmade"
"$PYTHON" "$top_srcdir/tests/tools/make_layouts.py" sharded "$src/sharded" "$src/run" ||
    fail "make_layouts.py sharded failed"
printf '{"weight_map": {"a": "missing.safetensors"}}\n' > "$src/handmade/bad.index.json"
printf 'not json\n' > "$src/handmade/junk.index.json"
# Tensors of more than one read block of the package (4 MiB) each.
"$PYTHON" - "$src/handmade/wide.safetensors" <<'PY' || fail "writing wide.safetensors failed"
import json, struct, sys
import numpy as np
n, names = 3 << 20, ("a", "b", "c")
header = {k: {"dtype": "BF16", "shape": [n], "data_offsets": [2 * n * i, 2 * n * (i + 1)]}
          for i, k in enumerate(names)}
raw = json.dumps(header).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw)
    for i in range(len(names)):
        w = np.random.default_rng(i).standard_normal(n, dtype=np.float32) * 0.02
        f.write((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())
PY
ln -s run/bf16 "$src/latest"
ln -s loop2 "$src/loop1"
ln -s loop1 "$src/loop2"
ln -s /etc/passwd "$src/outside"
mkdir -p "$TEST_TMP/www"
archive=$TEST_TMP/www/a.traj
# Small chunks: tensors of many chunks, so that reading one tensor has
# others to leave alone.
"$TRAJPACK" create -q --chunk-shift 10 "$archive" "$src/run" "$src/trainer" "$src/odd" "$src/sharded" \
    "$src/handmade" "$src/latest" "$src/loop1" "$src/loop2" "$src/outside" || fail "create failed"

url=""
if "$TRAJPACK" list http://127.0.0.1:1/x 2>&1 | grep -q "built without remote"; then
    echo "$TEST_NAME: built without remote archives: the http:// part is left out"
else
    . "$(dirname "$0")/remotelib.sh"
    start_lighttpd "$TEST_TMP/www"
    url=http://127.0.0.1:$HTTP_PORT/a.traj
fi

TRAJFS_TEST_SRC=$src TRAJFS_TEST_ARCHIVE=$archive TRAJFS_TEST_URL=$url \
TRAJFS_TEST_TMP=$TEST_TMP TRAJFS_TEST_TOOLS=$top_srcdir/tests/tools TRAJPACK=$TRAJPACK \
PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH} \
    "$PYTHON" "$top_srcdir/tests/python/test_api.py" -v ||
    fail "tests/python/test_api.py failed"
exit 0
