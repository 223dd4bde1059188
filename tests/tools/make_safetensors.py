#!/usr/bin/env python3
"""Writes hand-made safetensors files for the tests (standard library only).

    make_safetensors.py good DIR   valid files covering every dtype, special
                                   float bit patterns, empty and 0-d tensors,
                                   __metadata__, odd padding, unordered keys
    make_safetensors.py bad DIR    one malformed file per case the parser
                                   rejects, and DIR/EXPECT: one line per file,
                                   "filename<TAB>substring of the error message"

The output is deterministic (fixed random seed), so fixtures can be compared
byte for byte across runs.
"""

import json
import os
import random
import struct
import sys

# name: (bytes per element, exponent bits, mantissa bits); 0 bits for non-floats.
DTYPES = {
    "BOOL": (1, 0, 0),
    "U8": (1, 0, 0),
    "I8": (1, 0, 0),
    "I16": (2, 0, 0),
    "U16": (2, 0, 0),
    "I32": (4, 0, 0),
    "U32": (4, 0, 0),
    "I64": (8, 0, 0),
    "U64": (8, 0, 0),
    "F16": (2, 5, 10),
    "BF16": (2, 8, 7),
    "F32": (4, 8, 23),
    "F64": (8, 11, 52),
    "F8_E4M3": (1, 4, 3),
    "F8_E5M2": (1, 5, 2),
}


# ---- building files ----

def file_bytes(header, data=b"", declared_len=None):
    """The 8-byte length prefix, the header and the data. declared_len
    overrides the length written in the prefix."""
    length = len(header) if declared_len is None else declared_len
    return struct.pack("<Q", length) + header + data


def pad(header):
    """Pads the header with spaces to a multiple of 8 bytes, as the reference
    writer does."""
    return header + b" " * (-len(header) % 8)


def header_json(entries, metadata=None):
    """entries: list of (name, dtype, shape, begin, end), in header order."""
    obj = {}
    if metadata is not None:
        obj["__metadata__"] = metadata
    for name, dtype, shape, begin, end in entries:
        obj[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def nelem(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def lay_out(tensors):
    """tensors: list of (name, dtype, shape, data) in data order. Returns the
    header entries and the concatenated data."""
    entries, data = [], b""
    for name, dtype, shape, payload in tensors:
        assert len(payload) == nelem(shape) * DTYPES[dtype][0], name
        entries.append((name, dtype, shape, len(data), len(data) + len(payload)))
        data += payload
    return entries, data


def write(directory, name, content):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(content)


# ---- tensor contents ----

def float_specials(exp_bits, man_bits):
    """Bit patterns a float codec must keep exactly: signed zeros, smallest
    and largest subnormals, smallest normal, largest finite, infinities (for
    F8_E4M3 these patterns are finite numbers or NaN: the bits are what
    matter), quiet and signalling NaNs with payloads, negative NaN."""
    sign = 1 << (exp_bits + man_bits)
    exp_ones = ((1 << exp_bits) - 1) << man_bits
    man_ones = (1 << man_bits) - 1
    magnitudes = [
        0,
        1,
        man_ones,
        1 << man_bits,
        exp_ones - (1 << man_bits) + man_ones,
        exp_ones,
        exp_ones | (1 << (man_bits - 1)),
        exp_ones | 1,
        exp_ones | man_ones,
        exp_ones | (1 << (man_bits - 1)) | 1,
    ]
    return magnitudes + [m | sign for m in magnitudes]


def tensor_data(rng, dtype, count):
    """count elements: the special bit patterns first for floats, then random
    bytes (0 or 1 for BOOL)."""
    size, exp_bits, man_bits = DTYPES[dtype]
    if dtype == "BOOL":
        return bytes(rng.randrange(2) for _ in range(count))
    out = b""
    if exp_bits:
        for bits in float_specials(exp_bits, man_bits)[:count]:
            out += bits.to_bytes(size, "little")
    return out + bytes(rng.randrange(256) for _ in range(count * size - len(out)))


# ---- good files ----

def good_all_dtypes(rng):
    """Every dtype, odd element counts and shapes."""
    shapes = [[37], [3, 13], [1, 29], [5, 1, 7], [41], [2, 3, 5], [23], [1, 1, 31], [43]]
    tensors = []
    for i, dtype in enumerate(DTYPES):
        shape = shapes[i % len(shapes)]
        tensors.append(("layer.%d.%s" % (i, dtype.lower()), dtype, shape,
                        tensor_data(rng, dtype, nelem(shape))))
    entries, data = lay_out(tensors)
    return file_bytes(pad(header_json(entries)), data)


def good_empty_and_scalar(rng):
    """0-d tensors and zero-element tensors at the start, between tensors
    (several at one offset), and at the end."""
    tensors = [
        ("empty.first", "F32", [0], b""),
        ("empty.also_first", "I64", [3, 0], b""),
        ("scalar.f32", "F32", [], tensor_data(rng, "F32", 1)),
        ("empty.middle_a", "BF16", [0, 4096], b""),
        ("empty.middle_b", "U8", [0, 0, 0], b""),
        ("scalar.bf16", "BF16", [], tensor_data(rng, "BF16", 1)),
        ("scalar.f64", "F64", [], tensor_data(rng, "F64", 1)),
        ("scalar.bool", "BOOL", [], b"\x01"),
        ("vector", "F16", [5], tensor_data(rng, "F16", 5)),
        ("empty.last", "F8_E5M2", [7, 0], b""),
    ]
    entries, data = lay_out(tensors)
    return file_bytes(pad(header_json(entries)), data)


def good_metadata_padding(rng):
    """__metadata__ with escapes and non-ASCII text; the header padded with
    spaces to a length that is not a multiple of 8."""
    metadata = {
        "format": "pt",
        "step": "1200",
        "note": "caf\u00e9 \u2014 \"quoted\" \\ tab\t newline\n \U0001F600",
        "": "empty key",
    }
    tensors = [("w", "F32", [3, 3], tensor_data(rng, "F32", 9)),
               ("b", "F32", [3], tensor_data(rng, "F32", 3))]
    entries, data = lay_out(tensors)
    header = header_json(entries, metadata) + b" " * 13
    assert len(header) % 8 != 0
    return file_bytes(header, data)


def good_unordered_keys(rng):
    """Header keys in an order unrelated to the data order, __metadata__ in
    the middle, names with \\u escapes; padded the reference way."""
    tensors = [("model.layers.%d.weight" % i, "BF16", [4, 3 + i],
                tensor_data(rng, "BF16", 4 * (3 + i))) for i in range(6)]
    tensors.append(("\u00e9t\u00e9.\U0001F600", "U8", [2], b"\x07\x08"))
    entries, data = lay_out(tensors)
    shuffled = entries[:]
    random.Random(5).shuffle(shuffled)
    assert shuffled != entries
    obj = {}
    for i, (name, dtype, shape, begin, end) in enumerate(shuffled):
        if i == 3:
            obj["__metadata__"] = {"format": "pt"}
        obj[name] = {"data_offsets": [begin, end], "shape": shape, "dtype": dtype}
    header = json.dumps(obj, separators=(", ", ": "), ensure_ascii=True).encode()
    return file_bytes(pad(header), data)


def good_medium(rng):
    """One tensor large enough that reading it takes several read calls."""
    shape = [301, 257]
    entries, data = lay_out([("embed", "BF16", shape, tensor_data(rng, "BF16", nelem(shape)))])
    return file_bytes(pad(header_json(entries)), data)


def write_good(directory):
    rng = random.Random(20240601)
    files = {
        "all_dtypes.safetensors": good_all_dtypes(rng),
        "empty_and_scalar.safetensors": good_empty_and_scalar(rng),
        "metadata_padding.safetensors": good_metadata_padding(rng),
        "unordered_keys.safetensors": good_unordered_keys(rng),
        "medium.safetensors": good_medium(rng),
        "no_tensors.safetensors": file_bytes(b"{}"),
        "metadata_only.safetensors": file_bytes(pad(b'{"__metadata__":{"format":"pt"}}')),
    }
    for name, content in files.items():
        write(directory, name, content)


# ---- bad files ----

def entry(dtype='"U8"', shape="[4]", offsets="[0,4]", extra=""):
    """A tensor entry as raw JSON; each argument is JSON text, so that it can
    be of the wrong type or malformed."""
    return ('{"dtype":%s,"shape":%s,"data_offsets":%s%s}' % (dtype, shape, offsets, extra)).encode()


def with_tensors(names, data_len, body=entry()):
    """A file whose tensors, named as given (raw JSON string contents), all
    have the entry body."""
    members = b",".join(b'"' + name + b'":' + body for name in names)
    return file_bytes(pad(b"{" + members + b"}"), bytes(data_len))


def one_tensor(body, data_len):
    """A file whose only tensor "t" has the given raw JSON entry."""
    return with_tensors([b"t"], data_len, body)


def tensors_at(offsets, data_len):
    """U8 tensors "a", "b", ... at the given [begin, end) offsets."""
    entries = [(chr(ord("a") + i), "U8", [end - begin], begin, end)
               for i, (begin, end) in enumerate(offsets)]
    return file_bytes(pad(header_json(entries)), bytes(data_len))


def only_metadata(metadata_json):
    return file_bytes(pad(b'{"__metadata__":' + metadata_json + b"}"))


# filename: (contents, substring expected in the error message)
BAD = {
    "empty_file": (b"", "shorter than 8 bytes"),
    "short_file": (b"\x02\x00\x00\x00\x00", "shorter than 8 bytes"),
    "header_too_long": (file_bytes(b"{}", declared_len=200 << 20), "exceeds the limit"),
    "truncated": (one_tensor(entry(), 4)[:30], "exceeds the file size"),
    "truncated_data": (one_tensor(entry(), 3), "extend past the end of the data section"),
    "bad_json": (file_bytes(pad(b'{"t":{"dtype":"U8",')), "invalid JSON header"),
    "not_object": (file_bytes(pad(b"[]")), "header is not a JSON object"),
    "duplicate": (with_tensors([b"t", b"t"], 4), 'duplicate tensor name "t"'),
    "duplicate_metadata": (file_bytes(pad(b'{"__metadata__":{},"__metadata__":{}}')),
                           "duplicate __metadata__"),
    "entry_not_object": (one_tensor(b'["U8",[4],[0,4]]', 4), "entry is not a JSON object"),
    "missing_key": (one_tensor(b'{"dtype":"U8","shape":[4]}', 4), 'missing "data_offsets"'),
    "extra_key": (one_tensor(entry(extra=',"foo":1'), 4), 'unexpected key "foo"'),
    "duplicate_key": (one_tensor(entry(extra=',"dtype":"U8"'), 4), 'duplicate key "dtype"'),
    "unknown_dtype": (one_tensor(entry(dtype='"F12"'), 4), 'unknown dtype "F12"'),
    "dtype_not_string": (one_tensor(entry(dtype="1"), 4), "dtype is not a string"),
    "shape_not_array": (one_tensor(entry(shape="4"), 4), "shape is not an array"),
    "negative_shape": (one_tensor(entry(shape="[-4]"), 4),
                       "shape[0] is not a non-negative integer"),
    "fractional_shape": (one_tensor(entry(shape="[2,2.0]"), 4),
                         "shape[1] is not a non-negative integer"),
    "huge_shape": (one_tensor(entry(shape="[18446744073709551616]"), 4),
                   "shape[0] is larger than 2^64-1"),
    "shape_overflow": (one_tensor(entry(shape="[4294967296,4294967296]"), 4),
                       "element count of shape [4294967296, 4294967296] overflows 64 bits"),
    "nbytes_overflow": (one_tensor(entry(dtype='"F64"', shape="[2305843009213693952]"), 4),
                        "byte size of dtype F64"),
    "bad_offsets": (one_tensor(entry(offsets="[0,2,4]"), 4),
                    "data_offsets is not an array of 2 integers"),
    "reversed_offsets": (one_tensor(entry(offsets="[4,0]"), 4), "begin is after end"),
    "size_mismatch": (one_tensor(entry(dtype='"F32"', shape="[3]", offsets="[0,10]"), 10),
                      "data_offsets [0, 10] do not match dtype F32 x shape [3] (12 bytes)"),
    "overlap": (tensors_at([(0, 8), (4, 12)], 12), 'data_offsets [4, 12] overlap tensor "a"'),
    "gap": (tensors_at([(0, 4), (8, 12)], 12), 'gap of 4 bytes after tensor "a"'),
    "gap_at_start": (tensors_at([(4, 8)], 8), "gap of 4 bytes at the start of the data section"),
    "trailing": (tensors_at([(0, 4)], 9), "5 trailing bytes after the last tensor"),
    "metadata_not_object": (only_metadata(b'["pt"]'), "__metadata__: not a JSON object"),
    "metadata_not_string": (only_metadata(b'{"step":1}'),
                            '__metadata__: key "step": value is not a string'),
    "nul_in_name": (with_tensors([b"a\\u0000b"], 4), "name contains a NUL character"),
    "invalid_utf8": (with_tensors([b"\xc0\xaf"], 4), "invalid UTF-8"),
    "lone_surrogate": (with_tensors([b"\\ud800"], 4), "lone high surrogate"),
    "nul_padding": (file_bytes(b'{"t":' + entry() + b"}\x00\x00\x00", bytes(4)),
                    "unexpected data after the top-level value"),
    "too_deep": (only_metadata(b'{"k":' + b"[" * 100 + b"]" * 100 + b"}"),
                 "nested deeper than 64 levels"),
}


def write_bad(directory):
    lines = []
    for name, (content, expected) in sorted(BAD.items()):
        filename = name + ".safetensors"
        assert "\t" not in expected and "\n" not in expected
        write(directory, filename, content)
        lines.append("%s\t%s\n" % (filename, expected))
    with open(os.path.join(directory, "EXPECT"), "w", encoding="utf-8") as f:
        f.writelines(lines)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("good", "bad"):
        sys.stderr.write("usage: %s good|bad DIR\n" % argv[0])
        return 2
    os.makedirs(argv[2], exist_ok=True)
    (write_good if argv[1] == "good" else write_bad)(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
