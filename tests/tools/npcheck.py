#!/usr/bin/python3
"""Maps every checkpoint below MOUNTED_DIR with numpy (mmap), parses its
header from the mapping and compares every tensor, bit for bit, with the
same file below ORIGINAL_DIR.

    npcheck.py ORIGINAL_DIR MOUNTED_DIR

Prints the number of checkpoints and tensors checked; exits 1 on the first
difference.
"""
import json
import os
import sys

import numpy as np

# Integer types of each dtype's width: comparing bit patterns is exact for
# NaN payloads and signed zeros, and numpy has no bfloat16 or float8.
BITS = {
    "BOOL": "u1", "U8": "u1", "I8": "u1", "F8_E5M2": "u1", "F8_E4M3": "u1",
    "I16": "<u2", "U16": "<u2", "F16": "<u2", "BF16": "<u2",
    "I32": "<u4", "U32": "<u4", "F32": "<u4",
    "I64": "<u8", "U64": "<u8", "F64": "<u8",
}


def tensors(mapping):
    """(name, array) of each tensor of a safetensors file mapped as bytes."""
    n = int(mapping[:8].view("<u8")[0])
    header = json.loads(bytes(mapping[8:8 + n]))
    data = mapping[8 + n:]
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        yield name, data[b:e].view(BITS[t["dtype"]]).reshape(t["shape"])


def check(original, mounted):
    m = np.memmap(mounted, dtype=np.uint8, mode="r")
    o = np.memmap(original, dtype=np.uint8, mode="r")
    want = dict(tensors(o))
    count = 0
    for name, arr in tensors(m):
        if name not in want or want[name].shape != arr.shape or not np.array_equal(want[name], arr):
            sys.exit(f"npcheck: {mounted}: tensor {name} differs from {original}")
        count += 1
    if count != len(want):
        sys.exit(f"npcheck: {mounted}: {count} tensors, the original has {len(want)}")
    del m, o
    return count


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    orig_dir, mount_dir = sys.argv[1:]
    files = tensors_total = 0
    for root, _, names in os.walk(orig_dir):
        for name in sorted(names):
            if not name.endswith(".safetensors"):
                continue
            rel = os.path.relpath(os.path.join(root, name), orig_dir)
            tensors_total += check(os.path.join(orig_dir, rel), os.path.join(mount_dir, rel))
            files += 1
    if not files:
        sys.exit(f"npcheck: no checkpoints below {orig_dir}")
    print(f"npcheck: {files} checkpoints, {tensors_total} tensors equal")


if __name__ == "__main__":
    main()
