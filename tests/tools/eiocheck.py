#!/usr/bin/python3
"""Checks that one tensor of a checkpoint in a mount reads as EIO and that
everything else (the header, every other tensor) reads as in the original.

    eiocheck.py ORIGINAL MOUNTED TENSOR

Each tensor is read with one pread of exactly its bytes, so the mount
should be a -o direct_io one (with the page cache, a page shared with the
damaged tensor fails too).
"""
import errno
import json
import os
import struct
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    original, mounted, bad = sys.argv[1:]
    with open(original, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    fo = os.open(original, os.O_RDONLY)
    fm = os.open(mounted, os.O_RDONLY)
    if os.pread(fm, 8 + n, 0) != os.pread(fo, 8 + n, 0):
        sys.exit(f"eiocheck: {mounted}: the header differs")
    seen_bad = False
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        off = 8 + n + b
        try:
            got = os.pread(fm, e - b, off)
        except OSError as err:
            if name == bad and err.errno == errno.EIO:
                seen_bad = True
                continue
            sys.exit(f"eiocheck: {mounted}: tensor {name}: {err}")
        if name == bad and e > b:
            sys.exit(f"eiocheck: {mounted}: the damaged tensor {name} read without an error")
        if got != os.pread(fo, e - b, off):
            sys.exit(f"eiocheck: {mounted}: tensor {name} differs")
    if not seen_bad:
        sys.exit(f"eiocheck: {mounted}: no tensor {bad}")


if __name__ == "__main__":
    main()
