"""Writes OUT/step-1.safetensors and OUT/step-2.safetensors: one bf16
tensor "w" of N elements each, the second the first plus small updates,
block by block (memory stays at a block whatever N).

    big_pair.py OUT N
"""
import json
import os
import struct
import sys

import numpy as np

BLOCK = 1 << 22


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    header = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    header += b" " * (-len(header) % 8)
    for step in (1, 2):
        with open(os.path.join(out, "step-%d.safetensors" % step), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            for at in range(0, n, BLOCK):
                m = min(BLOCK, n - at)
                rng = np.random.default_rng(at)
                w = rng.standard_normal(m, dtype=np.float32) * 0.02
                if step == 2:
                    w += rng.standard_normal(m, dtype=np.float32) * 2e-4
                f.write((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())


main()
