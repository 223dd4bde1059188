#!/bin/sh
# The Python package installed the way its README says, offline: pip
# into a venv that sees Debian's numpy, torch and fsspec; then, from
# another folder, `import trajfs` loads a checkpoint, and fsspec finds
# the trajfs:// protocol by the package's entry point alone.
set -eu
. "$(dirname "$0")/lib.sh"

ls "$top_srcdir"/python/trajfs/_trajfs*.so > /dev/null 2>&1 || {
    echo "SKIP: $TEST_NAME: the Python extension is not built (configure found no" \
         "python3-dev for $PYTHON; apt-get install python3-dev and configure again)"
    exit 77
}
"$PYTHON" -m venv --help > /dev/null 2>&1 && "$PYTHON" -m pip --version > /dev/null 2>&1 ||
    fail "$PYTHON has no venv or pip (apt-get install python3-venv python3-pip)"

src=$TEST_TMP/src
generate_tiny_trajectory "$src"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src" || fail "create failed"
ckpt=$(cd "$src" && ls bf16/*.safetensors | tail -n 1)

# A copy of python/, so that the build leaves nothing in the checkout.
cp -R "$top_srcdir/python" "$TEST_TMP/python"
rm -f "$TEST_TMP"/python/trajfs/_trajfs*.so
"$PYTHON" -m venv --system-site-packages "$TEST_TMP/venv" || fail "venv failed"
TRAJFS_BUILD_DIR=$top_builddir TRAJFS_SOURCE_DIR=$top_srcdir \
    "$TEST_TMP/venv/bin/pip" install -q --no-index --no-build-isolation "$TEST_TMP/python" \
    > "$TEST_TMP/pip.log" 2>&1 || { cat "$TEST_TMP/pip.log" >&2; fail "pip install failed"; }

cd "$TEST_TMP"
"$TEST_TMP/venv/bin/python" - "$archive" "$src" "$ckpt" <<'PY' || fail "the installed package failed"
import os, sys
archive, src, ckpt = sys.argv[1:]
src, stored = os.path.dirname(src), os.path.basename(src) + "/" + ckpt  # its archive path
import fsspec
import trajfs
assert os.path.dirname(trajfs.__file__).startswith(sys.prefix), trajfs.__file__
assert "trajfs.spec" not in sys.modules
with open(os.path.join(src, stored), "rb") as f:
    want = f.read()
with fsspec.open("trajfs://" + stored, archive=archive) as f:  # the entry point
    assert f.read() == want, "fsspec read other bytes"
with trajfs.open(archive) as ar:
    sd = ar.load(stored, framework="pt")
    assert sd and ar.read_bytes(stored) == want
print("installed package: ok")
PY
exit 0
