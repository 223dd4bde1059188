#!/usr/bin/python3
"""Writes safetensors checkpoints the way a training loop does: one file
per step, the header first, then each tensor with its own write() calls,
then close (with --fsync, fsync before it). The weights drift a little
from step to step, as a trained model's do. numpy only.

    write_checkpoints.py [--fsync] [--log LOG] [--seed S] DIR FIRST COUNT [ELEMENTS]

Writes DIR/step-N.safetensors for N = FIRST .. FIRST+COUNT-1, each with a
few F32 and BF16 tensors of about ELEMENTS elements in all (default
200000). The output depends only on the arguments (a fixed seed), so the
same files can be written into a mount and into a plain directory. With
--log, appends "NAME" to LOG (flushed and synced) after each close() that
succeeded: a crash test knows which commits returned success. Exits 1 on
the first failure, naming the file and the error.
"""
import json
import os
import sys

import numpy as np


def bf16_bytes(a):
    """The upper halves of float32 values: bfloat16, truncated."""
    return (a.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()


def tensors(elements):
    """Initial weights: name -> (dtype, shape, float32 values)."""
    n = max(elements // 4, 16)
    side = int(n ** 0.5)
    return {
        "embed.weight": ("F32", [side, n // side]),
        "h.0.attn.weight": ("BF16", [side, n // side]),
        "h.0.mlp.weight": ("F32", [n // 2]),
        "ln_f.bias": ("BF16", [n // 2]),
    }


def main():
    args = sys.argv[1:]
    fsync = "--fsync" in args
    args = [a for a in args if a != "--fsync"]
    log = seed = None
    for opt in ("--log", "--seed"):
        if opt in args:
            i = args.index(opt)
            value = args[i + 1]
            del args[i:i + 2]
            if opt == "--log":
                log = value
            else:
                seed = int(value)
    if len(args) not in (3, 4):
        sys.exit(__doc__)
    out, first, count = args[0], int(args[1]), int(args[2])
    elements = int(args[3]) if len(args) == 4 else 200000
    rng = np.random.default_rng(1234 if seed is None else seed)
    shapes = tensors(elements)
    weights = {k: rng.standard_normal(int(np.prod(s))).astype("<f4") * 0.02
               for k, (_, s) in shapes.items()}
    for step in range(first, first + count):
        for k in weights:  # a small step of training
            weights[k] += rng.standard_normal(weights[k].size).astype("<f4") * 1e-4
        blobs, header, offset = [], {"__metadata__": {"step": str(step)}}, 0
        for name, (dtype, shape) in shapes.items():
            data = bf16_bytes(weights[name]) if dtype == "BF16" else weights[name].tobytes()
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(data)]}
            blobs.append(data)
            offset += len(data)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        name = "step-%d.safetensors" % step
        path = os.path.join(out, name)
        try:
            with open(path, "wb", buffering=0) as f:
                f.write(len(text).to_bytes(8, "little") + text)
                for data in blobs:
                    for at in range(0, len(data), 1 << 16):
                        f.write(data[at:at + (1 << 16)])
                if fsync:
                    os.fsync(f.fileno())
        except OSError as e:
            sys.exit("write_checkpoints: %s: %s" % (path, e))
        if log:
            with open(log, "a") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())


if __name__ == "__main__":
    main()
