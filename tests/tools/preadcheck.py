#!/usr/bin/python3
"""Random preads of a file through a mount, compared with the original.

    preadcheck.py [--count N] [--max-len BYTES] [--chunk-shift K] [--seed S]
                  ORIGINAL MOUNTED

Half of the reads start at uniformly random offsets; the others straddle
a border where the mount switches between sources of bytes: the end of the
8-byte length and of the JSON header, tensor starts and ends, and the
chunk borders inside tensors (2^K elements per chunk; for other files 2^K
bytes). Lengths are log-uniform from 1 byte to --max-len. Reads at and
past the end of the file are checked too. Exits 1 at the first mismatch.
"""
import argparse
import json
import math
import os
import random
import struct
import sys

DTYPE_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}


def borders(path, size, chunk_shift):
    """Offsets where the bytes of a file change source."""
    with open(path, "rb") as f:
        head = f.read(8)
        if path.endswith(".safetensors") and len(head) == 8:
            (n,) = struct.unpack("<Q", head)
            header = json.loads(f.read(n))
            start = 8 + n
            out = {8, start}
            for name, t in header.items():
                if name == "__metadata__":
                    continue
                b, e = t["data_offsets"]
                step = DTYPE_SIZE[t["dtype"]] << chunk_shift
                out.update(range(start + b, start + e, step))
                out.add(start + e)
            return sorted(o for o in out if o <= size)
    return list(range(0, size + 1, 1 << chunk_shift))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--max-len", type=int, default=4 << 20)
    ap.add_argument("--chunk-shift", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("original")
    ap.add_argument("mounted")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    size = os.path.getsize(a.original)
    if os.path.getsize(a.mounted) != size:
        sys.exit(f"preadcheck: {a.mounted}: size {os.path.getsize(a.mounted)}, expected {size}")
    edges = borders(a.original, size, a.chunk_shift)
    fo = os.open(a.original, os.O_RDONLY)
    fm = os.open(a.mounted, os.O_RDONLY)

    def check(off, length):
        want = os.pread(fo, length, off)
        got = os.pread(fm, length, off)
        if got != want:
            sys.exit(f"preadcheck: {a.mounted}: pread({length} bytes at {off}) returned "
                     f"{len(got)} bytes that differ from the original's {len(want)}")

    for e in edges:  # one byte on each side of every border
        check(max(e - 1, 0), 2)
    check(size, 1)
    check(size + 12345, 100)
    for i in range(a.count):
        length = max(1, int(math.exp(rnd.uniform(0, math.log(a.max_len)))))
        if i % 2 and edges:
            off = max(0, rnd.choice(edges) - rnd.randrange(length))
        else:
            off = rnd.randrange(size + 1)
        check(off, length)
    os.close(fo)
    os.close(fm)


if __name__ == "__main__":
    main()
