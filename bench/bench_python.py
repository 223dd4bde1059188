#!/usr/bin/python3
"""Loading checkpoints with the Python package, against the mount and
`trajpack extract`, in the same run.

    bench/bench_python.py CORPUS_DIR [ARCHIVE]
    bench/bench_python.py --big DIR

CORPUS_DIR: the benchmark corpus (bench/benchlib.sh makes it; any folder
of checkpoints does). It is packed once with `trajpack create` defaults
into ARCHIVE (default $TMPDIR/trajfs-bench-<name>.traj, rebuilt when
older than the corpus). For the newest weights and the newest optimizer
state, $BENCH_REPEAT rounds (default 5), each measuring side by side,
the page cache dropped before each cold one:

  python cold   a fresh trajfs.open, then ar.load(FILE, framework="pt")
  python warm   the same load again (decoded chunks in the cache)
  mount cold    a fresh trajfs mount, FILE read whole into memory
  extract -O    `trajpack extract -O ARCHIVE FILE | cat > /dev/null`

then one tensor of the largest file: ar.tensor, cold, and the bytes its
reader decoded. With --big instead: a safetensors file of 2.1 GB (32
bf16 tensors of 2^25 elements) made in DIR and packed there, once, and
one of its tensors read cold as above. Prints medians (min-max) and
ratios; no thresholds.
Needs root (drop_caches) and the built package (make with python3-dev).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILDDIR", HERE)
sys.path.insert(0, os.path.join(HERE, "python"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402,F401  (imported before any timing, as a loader has it)

import trajfs  # noqa: E402
from trajfs._load import read_safetensors_header  # noqa: E402

TRAJPACK = os.path.join(BUILD, "trajpack")
TRAJFS = os.path.join(BUILD, "trajfs")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


def mount_read(archive, mnt, path):
    """Seconds to read path whole through a fresh mount (mounting not counted)."""
    daemon = subprocess.Popen([TRAJFS, archive, mnt, "-f"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if mounted(mnt):
                break
            if daemon.poll() is not None:
                raise SystemExit("bench_python: trajfs did not mount")
            time.sleep(0.025)
        drop_caches()
        size = os.path.getsize(os.path.join(mnt, path))
        buf = bytearray(size)
        t0 = time.perf_counter()
        with open(os.path.join(mnt, path), "rb", buffering=0) as f:
            view, got = memoryview(buf), 0
            while got < size:
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
        return time.perf_counter() - t0
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        daemon.wait()


def extract_pipe(archive, path):
    drop_caches()
    t0 = time.perf_counter()
    subprocess.run(f"'{TRAJPACK}' extract -O '{archive}' '{path}' | cat > /dev/null",
                   shell=True, check=True)
    return time.perf_counter() - t0


def python_load(archive, path):
    """(cold seconds, warm seconds) of ar.load in a fresh archive (its
    opening not counted, as the mount's is not)."""
    with trajfs.open(archive) as ar:
        drop_caches()
        t0 = time.perf_counter()
        ar.load(path, framework="pt")
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        ar.load(path, framework="pt")
        warm = time.perf_counter() - t0
    return cold, warm


def summary(xs):
    return f"{statistics.median(xs):.3f} s ({min(xs):.3f}-{max(xs):.3f})"


def one_tensor(archive, path):
    """Reads the largest tensor of path cold; prints what it decoded."""
    with trajfs.open(archive) as ar:
        with trajfs.ArchiveFile(ar, path) as f:
            header, _ = read_safetensors_header(f)
            size = f.size
        header.pop("__metadata__", None)
        one = max(header, key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])
        drop_caches()
        t0 = time.perf_counter()
        t = ar.tensor(path, one, framework="pt")
        took = time.perf_counter() - t0
        decoded = ar.stats()["decoded_bytes"]
    nbytes = t.numel() * t.element_size()
    print(f"one tensor of {path} ({size / 1e6:.1f} MB, {len(header)} tensors), cold: "
          f"{one} ({nbytes / 1e6:.2f} MB) in {took:.3f} s, "
          f"{decoded / 1e6:.2f} MB decoded ({decoded / size:.1%} of the file)")


def big(folder):
    """A 2.1 GB safetensors file in folder, packed into folder/big.traj."""
    import json
    import struct

    import numpy as np
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "big", "model.safetensors")
    archive = os.path.join(folder, "big.traj")
    n, count = 1 << 25, 32
    if not os.path.exists(path):
        print(f"writing {path} ...", flush=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        header = {f"layer.{i}.weight": {"dtype": "BF16", "shape": [n],
                                        "data_offsets": [2 * n * i, 2 * n * (i + 1)]}
                  for i in range(count)}
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(path + ".part", "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            rng = np.random.default_rng(0)
            for _ in range(count):
                w = rng.standard_normal(n, dtype=np.float32) * 0.02
                f.write((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())
        os.rename(path + ".part", path)
    if not os.path.exists(archive):
        print(f"packing {path} into {archive} ...", flush=True)
        subprocess.run([TRAJPACK, "create", "-q", archive + ".part", os.path.dirname(path)],
                       check=True)
        os.rename(archive + ".part", archive)
    one_tensor(archive, "big/model.safetensors")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--big":
        if len(sys.argv) != 3:
            sys.exit(__doc__)
        return big(os.path.abspath(sys.argv[2]))
    corpus = os.path.abspath(sys.argv[1])
    name = os.path.basename(corpus)
    archive = (sys.argv[2] if len(sys.argv) > 2 else
               os.path.join(tempfile.gettempdir(), f"trajfs-bench-{name}.traj"))
    if not os.path.exists(archive) or os.path.getmtime(archive) < os.path.getmtime(corpus):
        print(f"packing {corpus} into {archive} ...", flush=True)
        if os.path.exists(archive):
            os.remove(archive)
        subprocess.run([TRAJPACK, "create", "-q", archive, corpus], check=True)
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".safetensors"))
    weights = [f for f in files if "optim" not in f]
    optim = [f for f in files if "optim" in f]
    if not weights or not optim:
        sys.exit(f"bench_python: {corpus} holds no weights and optimizer files")
    repeat = int(os.environ.get("BENCH_REPEAT", "5"))
    mnt = tempfile.mkdtemp(prefix="trajfs-bench_python.")
    try:
        for label, f in (("newest weights", weights[-1]), ("newest optimizer state", optim[-1])):
            path = f"{name}/{f}"
            size = os.path.getsize(os.path.join(corpus, f))
            cold, warm, mount, extract = [], [], [], []
            for _ in range(repeat):
                c, w = python_load(archive, path)
                cold.append(c)
                warm.append(w)
                mount.append(mount_read(archive, mnt, path))
                extract.append(extract_pipe(archive, path))
            ratio = [c / m for c, m in zip(cold, mount)]
            print(f"{label}: {f}, {size / 1e6:.1f} MB, median (min-max) of {repeat}")
            print(f"  python cold (ar.load)     {summary(cold)}, "
                  f"{statistics.median(ratio):.2f}x the mount ({min(ratio):.2f}-{max(ratio):.2f})")
            print(f"  python warm (ar.load)     {summary(warm)}, "
                  f"{size / statistics.median(warm) / 1e9:.2f} GB/s")
            print(f"  mount cold (read whole)   {summary(mount)}")
            print(f"  trajpack extract -O       {summary(extract)}")
        largest = max(files, key=lambda f: os.path.getsize(os.path.join(corpus, f)))
        one_tensor(archive, f"{name}/{largest}")
    finally:
        if mounted(mnt):
            subprocess.run(["fusermount3", "-uz", mnt], check=False)
        os.rmdir(mnt)


if __name__ == "__main__":
    main()
