#!/usr/bin/python3
"""Writes the tensors of a flat trajectory in the layouts trainers use.
numpy only.

    make_layouts.py [--dtype D] LAYOUT DIR TRAJ [TRAJ2]
    make_layouts.py [--dtype D] --baseline LAYOUT DIR TRAJ [TRAJ2]

TRAJ is the output of the test-data generator (make_trajectory.py):
TRAJ/step-N.safetensors weights, or with several dtypes (--dtype bf16,fp32)
TRAJ/bf16/step-N.safetensors and so on, and with --optimizer
TRAJ/step-N.optim.safetensors. The weights are those of --dtype D (default:
the only ones, or the first dtype in TRAJ/config.json). Only tensor files
are written (no config.json), so a layout and its baseline hold the same
tensor bytes and nothing else.

Creates DIR (which must not exist) holding the layout:

    flat         step-N.safetensors, step-N.optim.safetensors (copies)
    single       checkpoint-N/model.safetensors, checkpoint-N/optimizer.safetensors
    sharded      checkpoint-N/model-0000K-of-00003.safetensors (the weights
                 split into 3 shards by size, as transformers splits them),
                 checkpoint-N/model.safetensors.index.json (weight_map),
                 checkpoint-N/optimizer.safetensors
    alternating  one series step-N.safetensors whose checkpoints are bf16 and
                 fp32 copies of the weights in turn (TRAJ needs bf16/ and fp32/)
    prefix       flat, but every weight's name has the "_orig_mod." prefix
                 (torch.compile's) from the middle checkpoint on
    sweep        run1/ and run2/, flat, from TRAJ and TRAJ2 (other seeds)
    addlater     out/checkpoint-N/..., as single (the caller adds the last
                 checkpoint to an archive later)
    unmatched    step-N.safetensors of the last step whose tensors keep
                 their names but have half the elements (flattened): they
                 match no tensor of any other layout

With --baseline, DIR instead holds the flat layout of the same tensors, as
one directory per archive to compare with (the baseline size is the sum of
their archives): DIR/flat/ for every layout but these,
    alternating  DIR/flat/bf16/ and DIR/flat/fp32/: the two series as
                 written, each with the checkpoints that are of its dtype
    prefix       DIR/flat/: the same tensor bytes under unprefixed names
    sweep        DIR/run1/ and DIR/run2/: each run in its own archive

Files are written as the test-data generator writes them: an 8-byte
little-endian header length, compact JSON with __metadata__ first and then
the tensors in data order (descending dtype rank, then name), padded with
spaces to a multiple of 8, then the tensor bytes.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

# The reference library's dtype order; data is laid out by descending rank.
DTYPE_RANK = {d: i for i, d in enumerate(
    ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
     "I32", "U32", "F32", "F64", "I64", "U64"])}
DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2,
              "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
              "F64": 8, "I64": 8, "U64": 8}
SHARDS = 3
COMPILE_PREFIX = "_orig_mod."
STEP_FILE = re.compile(r"^step-(\d+)\.safetensors$")


def fail(msg):
    sys.exit("make_layouts: " + msg)


# ---- safetensors ----

def read_safetensors(path):
    """(metadata, [(name, dtype, shape, bytes)] in data order)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail("%s: not a safetensors file" % path)
    n = struct.unpack("<Q", raw[:8])[0]
    if n > len(raw) - 8:
        fail("%s: header length %d past the end" % (path, n))
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        fail("%s: bad header: %s" % (path, e))
    meta = header.pop("__metadata__", None)
    data = memoryview(raw)[8 + n:]
    tensors = []
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = info["data_offsets"]
        if not 0 <= a <= b <= len(data):
            fail("%s: tensor %s lies outside the file" % (path, name))
        tensors.append((name, info["dtype"], list(info["shape"]), bytes(data[a:b])))
    return meta, tensors


def safetensors_bytes(tensors, metadata):
    """The file of tensors [(name, dtype, shape, bytes)] and metadata."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    order = sorted(tensors, key=lambda t: (-DTYPE_RANK[t[1]], t[0]))
    offset = 0
    for name, dtype, shape, data in order:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return b"".join([struct.pack("<Q", len(text)), text] + [t[3] for t in order])


def write_safetensors(path, tensors, metadata):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))


# ---- the flat trajectory ----

class Trajectory:
    """The checkpoints of a generator run: steps, weights and optimizer
    files by step."""

    def __init__(self, root, dtype):
        self.root = root
        self.weight_dir = self.dtype_dir(dtype)
        self.steps = steps_in(self.weight_dir)
        if not self.steps:
            fail("no step-N.safetensors in %s" % self.weight_dir)

    def dtype_dir(self, dtype):
        if dtype is None:
            if steps_in(self.root):
                return self.root
            dtype = self.config_dtypes()[0]
        d = os.path.join(self.root, dtype)
        if not os.path.isdir(d):
            fail("%s has no %s/ (generate it with --dtype %s)" % (self.root, dtype, dtype))
        return d

    def config_dtypes(self):
        try:
            with open(os.path.join(self.root, "config.json")) as f:
                return json.load(f)["dtype"].split(",")
        except (OSError, ValueError, KeyError) as e:
            fail("%s: no step-N.safetensors and no dtype in config.json (%s)" % (self.root, e))

    def weights(self, step, dtype_dir=None):
        return os.path.join(dtype_dir or self.weight_dir, "step-%s.safetensors" % self.steps[step])

    def optim(self, step):
        """The optimizer file of a step, or None."""
        p = os.path.join(self.root, "step-%s.optim.safetensors" % self.steps[step])
        return p if os.path.exists(p) else None

    def step_list(self):
        return sorted(self.steps)


def steps_in(d):
    """step number -> its digits as written, for d's step-N.safetensors."""
    found = {}
    for name in os.listdir(d):
        m = STEP_FILE.match(name)
        if m:
            found[int(m.group(1))] = m.group(1)
    return found


# ---- layouts ----

def write_flat(traj, out, rename=None):
    """step-N.safetensors and step-N.optim.safetensors; rename(index, path)
    gives a checkpoint's weight tensors, or None for a copy of the file."""
    os.makedirs(out)
    for i, step in enumerate(traj.step_list()):
        dest = os.path.join(out, os.path.basename(traj.weights(step)))
        renamed = rename(i, traj.weights(step)) if rename else None
        if renamed is None:
            shutil.copyfile(traj.weights(step), dest)
        else:
            write_safetensors(dest, *renamed)
        copy_optim(traj, step, dest.replace(".safetensors", ".optim.safetensors"))


def copy_optim(traj, step, dest):
    if traj.optim(step):
        shutil.copyfile(traj.optim(step), dest)


def checkpoint_dirs(traj, out):
    """Creates out/checkpoint-N for each step: [(step, directory)]."""
    made = []
    for step in traj.step_list():
        d = os.path.join(out, "checkpoint-%d" % step)
        os.makedirs(d)
        made.append((step, d))
    return made


def write_single(traj, out):
    for step, d in checkpoint_dirs(traj, out):
        shutil.copyfile(traj.weights(step), os.path.join(d, "model.safetensors"))
        copy_optim(traj, step, os.path.join(d, "optimizer.safetensors"))


def shard_split(tensors, max_size):
    """transformers' split by size: tensors in order, a new shard when the
    next one would pass max_size, a tensor larger than it alone."""
    shards, current, size = [], [], 0
    for t in tensors:
        n = len(t[3])
        if n > max_size:
            shards.append([t])
            continue
        if current and size + n > max_size:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += n
    if current:
        shards.append(current)
    return shards


def split_in_shards(tensors, count):
    """The split of the smallest shard size that gives at most count
    shards (larger sizes never give more); it must give count."""
    total = sum(len(t[3]) for t in tensors)
    lo, hi = -(-total // count), total
    while lo < hi:
        mid = (lo + hi) // 2
        if len(shard_split(tensors, mid)) <= count:
            hi = mid
        else:
            lo = mid + 1
    shards = shard_split(tensors, lo)
    if len(shards) != count:
        fail("the weights (%d tensors) do not split into %d shards" % (len(tensors), count))
    return shards


def write_sharded(traj, out):
    for step, d in checkpoint_dirs(traj, out):
        meta, tensors = read_safetensors(traj.weights(step))
        weight_map = {}
        shards = split_in_shards(tensors, SHARDS)
        for k, shard in enumerate(shards, 1):
            name = "model-%05d-of-%05d.safetensors" % (k, len(shards))
            write_safetensors(os.path.join(d, name), shard, meta)
            weight_map.update((t[0], name) for t in shard)
        index = {"metadata": {"total_size": sum(len(t[3]) for t in tensors)},
                 "weight_map": weight_map}
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
        copy_optim(traj, step, os.path.join(d, "optimizer.safetensors"))


def alternating_dtype_dirs(traj):
    """The weight directories checkpoint i takes its weights from: bf16
    and fp32 in turn."""
    dirs = [traj.dtype_dir("bf16"), traj.dtype_dir("fp32")]
    return [dirs[i % 2] for i in range(len(traj.steps))]


def write_alternating(traj, out):
    os.makedirs(out)
    for step, src in zip(traj.step_list(), alternating_dtype_dirs(traj)):
        dest = os.path.join(out, "step-%s.safetensors" % traj.steps[step])
        shutil.copyfile(traj.weights(step, src), dest)
        copy_optim(traj, step, dest.replace(".safetensors", ".optim.safetensors"))


def write_alternating_baseline(traj, out):
    flat = os.path.join(out, "flat")
    os.makedirs(flat)
    for step, src in zip(traj.step_list(), alternating_dtype_dirs(traj)):
        series = os.path.join(flat, os.path.basename(src))
        os.makedirs(series, exist_ok=True)
        shutil.copyfile(traj.weights(step, src), os.path.join(series, os.path.basename(traj.weights(step))))
        copy_optim(traj, step, os.path.join(flat, "step-%s.optim.safetensors" % traj.steps[step]))


def compiled_names(count):
    """rename for write_flat: the prefix from the middle checkpoint on."""
    def rename(index, path):
        if index < count // 2:
            return None
        meta, tensors = read_safetensors(path)
        return [(COMPILE_PREFIX + n, d, s, b) for n, d, s, b in tensors], meta
    return rename


def write_unmatched(traj, out):
    """The last weights, each tensor flattened to its first half."""
    os.makedirs(out)
    step = traj.step_list()[-1]
    meta, tensors = read_safetensors(traj.weights(step))
    halves = []
    for name, dtype, shape, data in tensors:
        count = int(np.prod(shape, dtype=np.int64))
        keep = max(count // 2, 1) if count > 1 else 0
        halves.append((name, dtype, [keep], data[:keep * DTYPE_SIZE[dtype]]))
    write_safetensors(os.path.join(out, os.path.basename(traj.weights(step))), halves, meta)


def build(layout, out, trajs):
    first = trajs[0]
    if layout == "flat":
        write_flat(first, out)
    elif layout == "single":
        write_single(first, out)
    elif layout == "sharded":
        write_sharded(first, out)
    elif layout == "alternating":
        write_alternating(first, out)
    elif layout == "prefix":
        write_flat(first, out, compiled_names(len(first.steps)))
    elif layout == "sweep":
        os.makedirs(out)
        for k, traj in enumerate(trajs, 1):
            write_flat(traj, os.path.join(out, "run%d" % k))
    elif layout == "addlater":
        write_single(first, os.path.join(out, "out"))
    elif layout == "unmatched":
        write_unmatched(first, out)


def build_baseline(layout, out, trajs):
    if layout == "alternating":
        write_alternating_baseline(trajs[0], out)
    elif layout == "sweep":
        os.makedirs(out)
        for k, traj in enumerate(trajs, 1):
            write_flat(traj, os.path.join(out, "run%d" % k))
    else:
        os.makedirs(out)
        write_flat(trajs[0], os.path.join(out, "flat"))


LAYOUTS = ["flat", "single", "sharded", "alternating", "prefix", "sweep", "addlater", "unmatched"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", action="store_true",
                    help="write the flat layout of the same tensors instead")
    ap.add_argument("--dtype", help="the weights' dtype subfolder of TRAJ (default: the first)")
    ap.add_argument("layout", choices=LAYOUTS)
    ap.add_argument("dir", help="the directory to create")
    ap.add_argument("traj", nargs="+", help="generator output folder(s); sweep takes two")
    args = ap.parse_args()
    runs = 2 if args.layout == "sweep" else 1
    if len(args.traj) != runs:
        fail("%s takes %d trajector%s" % (args.layout, runs, "ies" if runs > 1 else "y"))
    if os.path.lexists(args.dir):
        fail("%s exists" % args.dir)
    trajs = [Trajectory(t, args.dtype) for t in args.traj]
    if args.baseline and args.layout == "unmatched":
        fail("unmatched has no baseline")
    (build_baseline if args.baseline else build)(args.layout, args.dir, trajs)


if __name__ == "__main__":
    main()
