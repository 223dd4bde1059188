"""Checkpoints as tensors: safetensors files into numpy arrays or torch
tensors without a copy, torch.save files through torch.load. The header
of a file read from an archive is as untrusted as any input: every
field is checked before a byte of data is read."""
import json
import math
import struct

# safetensors' own bound on a header.
HEADER_MAX = 100 << 20

# safetensors dtype: (numpy dtype, torch dtype attribute, bytes)
DTYPES = {
    "F64": ("<f8", "float64", 8),
    "F32": ("<f4", "float32", 4),
    "F16": ("<f2", "float16", 2),
    "BF16": (None, "bfloat16", 2),
    "I64": ("<i8", "int64", 8),
    "I32": ("<i4", "int32", 4),
    "I16": ("<i2", "int16", 2),
    "I8": ("i1", "int8", 1),
    "U64": ("<u8", None, 8),
    "U32": ("<u4", None, 4),
    "U16": ("<u2", None, 2),
    "U8": ("u1", "uint8", 1),
    "BOOL": ("?", "bool", 1),
    "F8_E4M3": (None, "float8_e4m3fn", 1),
    "F8_E5M2": (None, "float8_e5m2", 1),
}

FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt"}


def _bad(f, why):
    return ValueError(f"{f.name}: not a valid safetensors file: {why}")


def read_safetensors_header(f):
    """(header dict, offset of the data) of the safetensors file f (an
    ArchiveFile), checked: each tensor's dtype, shape and data_offsets
    agree and lie inside the file."""
    size = f.size
    head = bytearray(8)
    if size < 8 or f.readinto_at(0, head) != 8:
        raise _bad(f, "shorter than its header's length")
    (n,) = struct.unpack("<Q", head)
    if n > HEADER_MAX or n > size - 8:
        raise _bad(f, f"a header of {n} bytes in a file of {size}")
    raw = bytearray(n)
    if f.readinto_at(8, raw) != n:
        raise _bad(f, "the header is cut short")
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(f, f"the header is no JSON ({e})") from None
    if not isinstance(header, dict):
        raise _bad(f, "the header is no JSON object")
    data_start = 8 + n
    data_len = size - data_start
    for name, t in header.items():
        if name == "__metadata__":
            if not isinstance(t, dict):
                raise _bad(f, "__metadata__ is no object")
            continue
        if not isinstance(t, dict):
            raise _bad(f, f"tensor {name!r} is no object")
        dtype, shape, offsets = t.get("dtype"), t.get("shape"), t.get("data_offsets")
        if dtype not in DTYPES:
            raise _bad(f, f"tensor {name!r}: unknown dtype {dtype!r}")
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise _bad(f, f"tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) or
                not 0 <= offsets[0] <= offsets[1] <= data_len):
            raise _bad(f, f"tensor {name!r}: data_offsets {offsets!r} outside the "
                          f"{data_len} bytes of data")
        if math.prod(shape) * DTYPES[dtype][2] != offsets[1] - offsets[0]:
            raise _bad(f, f"tensor {name!r}: {offsets[1] - offsets[0]} bytes for shape "
                          f"{shape} of {dtype}")
    return header, data_start


def _framework(framework):
    try:
        return FRAMEWORKS[framework]
    except KeyError:
        raise ValueError(f"framework must be 'np' or 'pt', not {framework!r}") from None


def _numpy_dtype(np, name, dtype):
    spec = DTYPES[dtype][0]
    if spec is None:
        raise TypeError(f"tensor {name!r}: numpy has no {dtype}; load it with framework='pt'")
    return np.dtype(spec)


def _torch_dtype(torch, name, dtype):
    attr = DTYPES[dtype][1]
    if attr is None or not hasattr(torch, attr):
        raise TypeError(f"tensor {name!r}: this torch has no {dtype}")
    return getattr(torch, attr)


def _views(buf, header, base, framework):
    """{name: tensor} viewing buf, which holds the data from offset base."""
    out = {}
    if framework == "np":
        import numpy as np
        for name, t in header.items():
            if name == "__metadata__":
                continue
            dt = _numpy_dtype(np, name, t["dtype"])
            lo, hi = t["data_offsets"]
            out[name] = np.frombuffer(buf, dtype=dt, count=(hi - lo) // dt.itemsize,
                                      offset=lo - base).reshape(t["shape"])
        return out
    import torch
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = _torch_dtype(torch, name, t["dtype"])
        lo, hi = t["data_offsets"]
        raw = buf[lo - base:hi - base]
        width = DTYPES[t["dtype"]][2]
        if (lo - base) % width:
            raw = raw.clone()  # a view needs the element's alignment
        out[name] = raw.view(dt).reshape(t["shape"])
    return out


def _buffer(n, framework):
    """(buffer of n bytes to decode into, the same as a numpy array): the
    tensors made from it own it. numpy allocates it either way: it asks
    the kernel for huge pages for large arrays (MADV_HUGEPAGE), where
    torch.empty's memory faults in 4 KiB at a time (86 MB: 11 ms against
    55 ms on the benchmark machine)."""
    import numpy as np
    array = np.empty(n, dtype=np.uint8)
    if framework == "np":
        return array, array
    import torch
    return torch.from_numpy(array), array


def _read_exactly(f, offset, target, ahead=True):
    n = f.readinto_at(offset, target, ahead)
    if n != len(target):
        raise OSError(5, f"{f.name}: the archive ends the file after {offset + n} bytes")


def is_torch_save(f):
    """Whether f holds a torch.save file: a zip archive, or a pickle of the
    legacy format (a safetensors file, whose header length may begin with
    the same byte, has its JSON's "{" at offset 8)."""
    head = bytearray(9)
    n = f.readinto_at(0, head)
    if n >= 4 and head[:4] == b"PK\x03\x04":
        return True
    return n >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5 and (n < 9 or head[8] != ord("{"))


def load_file(f, framework, torch_load_args):
    framework = _framework(framework)
    if is_torch_save(f):
        if framework != "pt":
            raise ValueError(f"{f.name}: a torch.save file: load it with framework='pt'")
        import io
        import torch
        args = {"map_location": "cpu", "weights_only": True}
        args.update(torch_load_args)
        return torch.load(io.BufferedReader(f, buffer_size=1 << 20), **args)
    if torch_load_args:
        raise TypeError(f"{f.name}: torch.load arguments for a safetensors file")
    header, data_start = read_safetensors_header(f)
    buf, array = _buffer(f.size - data_start, framework)
    _read_exactly(f, data_start, array)
    return _views(buf, header, 0, framework)


def tensor_from_file(f, name, framework):
    framework = _framework(framework)
    if is_torch_save(f):
        raise ValueError(f"{f.name}: tensor() reads safetensors files; load this torch.save "
                         "file with load(framework='pt')")
    header, data_start = read_safetensors_header(f)
    t = header.get(name) if name != "__metadata__" else None
    if t is None:
        raise KeyError(f"{f.name}: no tensor {name!r}")
    lo, hi = t["data_offsets"]
    buf, array = _buffer(hi - lo, framework)
    _read_exactly(f, data_start + lo, array, ahead=False)  # that tensor alone
    return _views(buf, {name: t}, lo, framework)[name]
