#!/usr/bin/python3
"""Checks that torch.load reads the same objects from two copies of
torch.save files. torch (numpy for files holding arrays).

    torch_same.py A B [FILE...]

FILE is a path relative to both A and B (default: every .pt, .pth, .bin
and .ckpt file below A). The same means: the same structure (types, dict
keys in order, an OrderedDict's _metadata), equal plain values (floats
bit for bit), and tensors, parameters and storages of the same dtype,
shape, strides, storage offset, requires_grad and storage bytes, sharing
storages alike (tied weights stay one storage). Exits 1 naming the first
difference.
"""
import os
import struct
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


class Differ(Exception):
    pass


def storage_bytes(storage):
    flat = torch.tensor([], dtype=storage.dtype).set_(storage)
    return flat.reshape(-1).view(torch.uint8).numpy().tobytes()


class Comparer:
    """Compares the objects of two loads; remembers, per side, the first
    path at which each storage was seen."""

    def __init__(self):
        self.first_seen = ({}, {})

    def same_storage(self, a, b, path):
        if a.dtype != b.dtype or a.size() != b.size():
            raise Differ("%s: storage %s[%d] vs %s[%d]" % (path, a.dtype, a.size(), b.dtype, b.size()))
        seen = [s.setdefault(x.data_ptr(), path) for s, x in zip(self.first_seen, (a, b))]
        if seen[0] != seen[1]:
            raise Differ("%s: shares its storage with %s in one file, with %s in the other" %
                         (path, seen[0], seen[1]))
        if seen[0] == path and storage_bytes(a) != storage_bytes(b):
            raise Differ("%s: other storage bytes" % path)

    def same_tensor(self, a, b, path):
        for what in ("dtype", "shape", "stride", "storage_offset", "requires_grad"):
            x, y = getattr(a, what), getattr(b, what)
            x, y = (x(), y()) if callable(x) else (x, y)
            if x != y:
                raise Differ("%s: %s %s vs %s" % (path, what, x, y))
        self.same_storage(a.storage(), b.storage(), path)

    def same(self, a, b, path):
        if type(a) is not type(b):
            raise Differ("%s: %s vs %s" % (path, type(a).__name__, type(b).__name__))
        if isinstance(a, torch.Tensor):
            self.same_tensor(a, b, path)
        elif isinstance(a, torch.storage.TypedStorage):
            self.same_storage(a, b, path)
        elif isinstance(a, dict):
            if list(a) != list(b):
                raise Differ("%s: keys %s vs %s" % (path, list(a), list(b)))
            for k in a:
                self.same(a[k], b[k], "%s.%s" % (path, k))
            self.same(getattr(a, "_metadata", None), getattr(b, "_metadata", None), path + "._metadata")
        elif isinstance(a, (list, tuple)):
            if len(a) != len(b):
                raise Differ("%s: %d vs %d items" % (path, len(a), len(b)))
            for k, (x, y) in enumerate(zip(a, b)):
                self.same(x, y, "%s.%d" % (path, k))
        elif isinstance(a, float):
            if struct.pack("<d", a) != struct.pack("<d", b):
                raise Differ("%s: %r vs %r" % (path, a, b))
        elif type(a).__module__ == "numpy":
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                raise Differ("%s: numpy %s%s vs %s%s" % (path, a.dtype, a.shape, b.dtype, b.shape))
        elif isinstance(a, (int, str, bytes, set, frozenset, type(None))):
            if a != b:
                raise Differ("%s: %r vs %r" % (path, a, b))
        else:
            raise Differ("%s: cannot compare a %s" % (path, type(a).__name__))


def torch_files(root):
    found = []
    for dirpath, _, filenames in os.walk(root):
        found += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames if f.endswith(SUFFIXES)]
    return sorted(found)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or torch_files(a)
    if not files:
        sys.exit("torch_same: no torch files below %s" % a)
    for rel in files:
        try:
            loaded = [torch.load(os.path.join(d, rel), map_location="cpu") for d in (a, b)]
            Comparer().same(loaded[0], loaded[1], rel)
        except Differ as e:
            sys.exit("torch_same: %s" % e)
        except Exception as e:  # a load that fails is a difference too
            sys.exit("torch_same: %s: %s: %s" % (rel, type(e).__name__, e))


if __name__ == "__main__":
    main()
