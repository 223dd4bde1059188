#!/bin/sh
# End-to-end demo on a fresh Debian 12 machine: installs what is missing
# for building, mounting and loading with numpy (sh .ci/install-deps; not
# the test tools), builds trajpack and trajfs, packs the bundled example
# trajectory, lists it with compression ratios, extracts it and proves
# every file byte-identical, then mounts the archive and loads a checkpoint through
# the mount with numpy (and torch, where installed), tensor for tensor
# equal to the original.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

sh .ci/install-deps
[ -x ./configure ] || autoreconf -fi
[ -f Makefile ] || ./configure -q
make -j"$(nproc)" trajpack trajfs

# Debian's python3, which has python3-numpy and python3-torch
PYTHON=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
mnt=$work/mnt
daemon=""
mounted() {
    awk -v d="$mnt" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}
cleanup() {
    if mounted; then
        fusermount3 -u "$mnt" 2> /dev/null || fusermount3 -uz "$mnt"
    fi
    if [ -n "$daemon" ]; then
        kill "$daemon" 2> /dev/null || true
        wait "$daemon" 2> /dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

echo "== pack examples/tiny-run (3 checkpoints + AdamW state, bf16/fp32)"
./trajpack create "$work/run.traj" examples/tiny-run
echo "== list"
./trajpack list -l "$work/run.traj"
echo "== verify"
./trajpack verify "$work/run.traj"
echo "== extract and compare"
mkdir "$work/out"
./trajpack extract "$work/run.traj" -C "$work/out"
diff -r examples/tiny-run "$work/out/tiny-run"
echo "byte-identical: $(find examples/tiny-run -type f | wc -l) files," \
     "$(du -sb examples/tiny-run | cut -f1) bytes in," \
     "$(stat -c %s "$work/run.traj") bytes archived"

echo "== mount at $mnt"
mkdir "$mnt"
./trajfs "$work/run.traj" "$mnt" -f 2> "$work/trajfs.log" &
daemon=$!
for _ in $(seq 100); do
    mounted && break
    kill -0 "$daemon" 2> /dev/null || break
    sleep 0.05
done
mounted || { cat "$work/trajfs.log" >&2; echo "demo: trajfs did not mount" >&2; exit 1; }
ls -l "$mnt/tiny-run"
ckpt=tiny-run/step-000006.safetensors
echo "== load $ckpt through the mount and compare it with the original"
libs=numpy
"$PYTHON" -c 'import torch' 2> /dev/null && libs="numpy torch"
for lib in $libs; do
    "$PYTHON" - "$lib" "$mnt/$ckpt" "examples/$ckpt" <<'PY'
import sys
import warnings

warnings.filterwarnings("ignore", message=".*non-writable.*")  # the mapping is read-only
sys.path.insert(0, "examples/mount")
from load_checkpoint import load_numpy, load_torch

lib, mounted, original = sys.argv[1:]


def raw(t):
    """The bytes of every element: compared bit for bit, NaNs and signed zeros too."""
    if lib == "torch":
        import torch
        return t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return t.tobytes()


load = load_torch if lib == "torch" else load_numpy
a, b = load(mounted), load(original)
assert a.keys() == b.keys(), "the mounted file holds other tensors"
for name in a:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, f"{name}: other shape"
    assert raw(a[name]) == raw(b[name]), f"{name} differs"
print(f"{lib}: {len(a)} tensors, {sum(len(raw(t)) for t in a.values())} bytes, "
      "equal to the original")
PY
done
fusermount3 -u "$mnt"
wait "$daemon"
daemon=""
echo "unmounted"
