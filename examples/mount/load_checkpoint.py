#!/usr/bin/python3
"""Load a checkpoint from a trajfs mount with numpy (default) or torch.

    load_checkpoint.py [--torch] CHECKPOINT.safetensors

The file is memory-mapped: only the pages of the tensors you touch are
read, and trajfs decodes only the chunks under them, so picking a few
tensors out of a large checkpoint is fast. Nothing here is specific to
trajfs: the mount shows ordinary safetensors files, and
safetensors.safe_open or torch.load work the same way.

Prints one line per tensor: name, dtype, shape and the sum of its bytes
(for comparing two copies of a file).
"""
import argparse
import json
import mmap
import struct

import numpy as np

# numpy has no bfloat16 or float8: those load as raw integers of their
# width (torch has them all).
NUMPY_DTYPES = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "F8_E5M2": "u1", "F8_E4M3": "u1",
    "I16": "<i2", "U16": "<u2", "F16": "<f2", "BF16": "<u2",
    "I32": "<i4", "U32": "<u4", "F32": "<f4",
    "I64": "<i8", "U64": "<u8", "F64": "<f8",
}


def read_header(buf):
    """The JSON header and the offset of the data section."""
    (n,) = struct.unpack_from("<Q", buf, 0)
    return json.loads(bytes(buf[8:8 + n])), 8 + n


def load_numpy(path):
    """name -> numpy array (read-only views of the mapped file)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    header, start = read_header(data)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = data[start + b:start + e].view(NUMPY_DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def load_torch(path):
    """name -> torch tensor (sharing the mapped file's pages)."""
    import torch

    dtypes = {
        "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
        "I32": torch.int32, "I64": torch.int64, "F16": torch.float16,
        "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
        # torch before 2.1 has no float8: raw bytes then
        "F8_E5M2": getattr(torch, "float8_e5m2", torch.uint8),
        "F8_E4M3": getattr(torch, "float8_e4m3fn", torch.uint8),
    }
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    header, start = read_header(buf)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        dtype = dtypes[t["dtype"]]
        if e == b:
            out[name] = torch.empty(t["shape"], dtype=dtype)
            continue
        # frombuffer warns that the mapping is read-only; the tensors are too.
        raw = torch.frombuffer(memoryview(buf), dtype=torch.uint8, count=e - b, offset=start + b)
        out[name] = raw.view(dtype).reshape(t["shape"])
    return out


def byte_sum(tensor, use_torch):
    if use_torch:
        import torch
        return int(tensor.reshape(-1).view(torch.uint8).sum())
    return int(tensor.reshape(-1).view(np.uint8).sum(dtype=np.uint64))


def main():
    ap = argparse.ArgumentParser(description="Load a checkpoint with numpy or torch.")
    ap.add_argument("--torch", action="store_true", help="load with torch instead of numpy")
    ap.add_argument("checkpoint")
    a = ap.parse_args()
    if a.torch:
        import warnings
        warnings.filterwarnings("ignore", message=".*non-writable.*")
        tensors = load_torch(a.checkpoint)
    else:
        tensors = load_numpy(a.checkpoint)
    for name, t in tensors.items():
        print(f"{name}\t{str(t.dtype).replace('torch.', '')}\t{tuple(t.shape)}\t{byte_sum(t, a.torch)}")


if __name__ == "__main__":
    main()
