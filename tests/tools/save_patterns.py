#!/usr/bin/python3
"""Saves a checkpoint tree (from make_layouts.py) into a directory the way
the savers of training runs do. numpy is not needed; rsync is, for its
pattern.

    save_patterns.py PATTERN TREE TARGET
    save_patterns.py list TREE

Writes TARGET/NAME/..., NAME being TREE's base name (as `trajpack create
ARCHIVE TREE` stores it), one checkpoint after the other in step order,
each file closed before the next is opened. A checkpoint is an entry whose
name starts with step-N or checkpoint-N (a file, or a directory of files);
files that are not part of one are saved first. PATTERN is how each
checkpoint is written:

    cp       `cp` of each file to its final name
    trainer  written under tmp-NAME (a directory's files inside it), then
             os.rename to NAME, as the transformers Trainer does
    tmpfile  each file written as FILE.tmp, then os.replace(FILE.tmp, FILE)
    rsync    `rsync -r` of the checkpoint (rsync writes .FILE.XXXXXX and
             renames it)
    direct   each file written in place, a safetensors file as a saver's
             save_file writes it: the header, then one write per tensor

`list` prints the archive paths (NAME/...) of the checkpoints, in the
order they are saved.
"""
import json
import os
import re
import struct
import subprocess
import sys

CHECKPOINT = re.compile(r"^(?:step|checkpoint)-(\d+)")
COPY_CHUNK = 1 << 20


def fail(msg):
    sys.exit("save_patterns: " + msg)


def natural_key(s):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def find_checkpoints(tree):
    """(other files, checkpoints): paths relative to tree; checkpoints in
    step order within each directory, directories in natural order."""
    others, found = [], []
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        rel = "" if rel == "." else rel
        keep = []
        for d in dirnames:
            m = CHECKPOINT.match(d)
            if m:
                found.append((natural_key(rel), int(m.group(1)), natural_key(d), os.path.join(rel, d)))
            else:
                keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            m = CHECKPOINT.match(f)
            if m:
                found.append((natural_key(rel), int(m.group(1)), natural_key(f), os.path.join(rel, f)))
            else:
                others.append(os.path.join(rel, f))
    return sorted(others, key=natural_key), [c[3] for c in sorted(found)]


def files_of(path):
    """The files of a checkpoint, relative to it ("" for a file), in
    natural order."""
    if not os.path.isdir(path):
        return [""]
    names = []
    for dirpath, _, filenames in os.walk(path):
        names += [os.path.relpath(os.path.join(dirpath, f), path) for f in filenames]
    return sorted(names, key=natural_key)


def copy_bytes(src, dest):
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        while True:
            block = fin.read(COPY_CHUNK)
            if not block:
                break
            fout.write(block)


def save_file_writes(src, dest):
    """The header, then each tensor with its own write; other bytes (and a
    file that does not parse) in one write."""
    with open(src, "rb") as f:
        raw = f.read()
    pieces = [raw]
    if src.endswith(".safetensors") and len(raw) >= 8:
        n = struct.unpack("<Q", raw[:8])[0]
        try:
            header = json.loads(raw[8:8 + n])
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
        except (ValueError, AttributeError, KeyError, IndexError, TypeError):
            ends = None
        if ends is not None:
            cuts = sorted({min(c, len(raw)) for c in [0, 8 + n, len(raw)] + [8 + n + max(e, 0) for e in ends]})
            pieces = [raw[a:b] for a, b in zip(cuts, cuts[1:])]
    with open(dest, "wb", buffering=0) as f:
        for p in pieces:
            f.write(p)


def each_file(src, dest, write):
    """Makes dest like src (a file, or a directory of files) with write(src
    file, dest file) for each file."""
    if os.path.isdir(src):
        os.makedirs(dest)
    for f in files_of(src):
        if f:
            os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
        write(os.path.join(src, f) if f else src, os.path.join(dest, f) if f else dest)


def via_tmpfile(s, d):
    copy_bytes(s, d + ".tmp")
    os.replace(d + ".tmp", d)


def save_cp(src, dest):
    each_file(src, dest, lambda s, d: subprocess.run(["cp", s, d], check=True))


def save_trainer(src, dest):
    tmp = os.path.join(os.path.dirname(dest), "tmp-" + os.path.basename(dest))
    each_file(src, tmp, copy_bytes)
    os.rename(tmp, dest)


def save_tmpfile(src, dest):
    each_file(src, dest, via_tmpfile)


def save_rsync(src, dest):
    subprocess.run(["rsync", "-r", src, os.path.dirname(dest) + "/"], check=True)


def save_direct(src, dest):
    each_file(src, dest, save_file_writes)


PATTERNS = {"cp": save_cp, "trainer": save_trainer, "tmpfile": save_tmpfile,
            "rsync": save_rsync, "direct": save_direct}


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "list":
        tree = args[1].rstrip("/")
        name = os.path.basename(tree)
        for c in find_checkpoints(tree)[1]:
            print(os.path.join(name, c))
        return
    if len(args) != 3 or args[0] not in PATTERNS:
        sys.exit(__doc__)
    pattern, tree, target = args[0], args[1].rstrip("/"), args[2]
    if not os.path.isdir(tree):
        fail("%s is not a directory" % tree)
    root = os.path.join(target, os.path.basename(tree))
    others, checkpoints = find_checkpoints(tree)
    os.makedirs(root, exist_ok=True)
    try:
        for rel in others + checkpoints:
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            PATTERNS[pattern](os.path.join(tree, rel), os.path.join(root, rel))
    except (OSError, subprocess.CalledProcessError) as e:
        fail("%s: %s" % (pattern, e))


if __name__ == "__main__":
    main()
