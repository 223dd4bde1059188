#!/usr/bin/python3
"""Writes a long run of small checkpoints, for bench/bench_catalog.sh.

    make_small_run.py DIR CHECKPOINTS [TENSORS [ELEMENTS]]

DIR gets step-000100.safetensors, step-000200.safetensors, ...: TENSORS
(default 100) bf16 vectors of ELEMENTS (default 4096) each, a random
walk from Gaussian weights of scale 0.02 with steps of 1e-4, as a slow
training run moves them. Deterministic (fixed seed). Needs numpy.
"""
import json
import os
import struct
import sys

import numpy as np


def main():
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__.strip())
    out, count = sys.argv[1], int(sys.argv[2])
    tensors = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    elements = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(elements).astype(np.float32) * 0.02 for _ in range(tensors)]
    header, offset = {}, 0
    for i in range(tensors):
        header["layers.%d.weight" % i] = {
            "dtype": "BF16", "shape": [elements], "data_offsets": [offset, offset + 2 * elements]}
        offset += 2 * elements
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    for k in range(count):
        parts = [struct.pack("<Q", len(text)), text]
        for w in weights:
            w += rng.standard_normal(elements).astype(np.float32) * 1e-4
            # bf16: the high half of the float32 bits (truncated)
            parts.append((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())
        with open(os.path.join(out, "step-%06d.safetensors" % ((k + 1) * 100)), "wb") as f:
            f.write(b"".join(parts))


if __name__ == "__main__":
    main()
