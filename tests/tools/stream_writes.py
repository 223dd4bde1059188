"""Files written into a writable mount the ways that test encoding while a
file is written (tests/shell/mount_rw_stream.sh).

    stream_writes.py make DIR               v1, v2, v3 and big .safetensors in DIR
    stream_writes.py slow SRC DST PAUSED GO  SRC in 16 writes; after 12 of them
                                            (read back through the descriptor)
                                            creates PAUSED, waits for GO
    stream_writes.py rewrite V1 V2 DST      DST written with V1 and, while V1's
                                            close runs, rewritten with V2
    stream_writes.py scatter SRC DST        the header written last
    stream_writes.py again SRC DST          all of SRC, then its middle again
    stream_writes.py shrink SRC DST         3/4 of SRC, truncated to 1/2, the rest
    stream_writes.py fill SRC DST           SRC in 1 MiB writes until one fails;
                                            prints the write's and the close's
                                            error names

Exits 1 with a message when a write or a close that must succeed fails.
"""
import errno
import json
import os
import struct
import sys
import threading
import time

import numpy as np


def safetensors(tensors):
    header, off = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(a.tobytes() for a in tensors.values())


def make(out):
    rng = np.random.default_rng(7)
    base = {f"layer{i}.weight": rng.standard_normal((256, 1024)).astype(np.float32) for i in range(6)}
    for step in (1, 2, 3):
        t = {k: (v + np.float32(1e-3 * step) * rng.standard_normal(v.shape).astype(np.float32))
             for k, v in base.items()}
        with open(os.path.join(out, f"v{step}.safetensors"), "wb") as f:
            f.write(safetensors(t))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def pieces(data, n):
    step = -(-len(data) // n)
    return [(o, data[o:o + step]) for o in range(0, len(data), step)]


def wait_for(path, seconds=120):
    end = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > end:
            sys.exit(f"stream_writes: {path} did not appear")
        time.sleep(0.05)


def slow(src, dst, paused, go):
    data = read(src)
    fd = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    for i, (off, piece) in enumerate(pieces(data, 16)):
        if i == 12:
            if os.pread(fd, off, 0) != data[:off]:
                sys.exit("stream_writes: the bytes written read back otherwise")
            open(paused, "w").close()
            wait_for(go)
        os.write(fd, piece)
    os.close(fd)


def write_all(path, data, before_close=None):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _, piece in pieces(data, 8):
        os.write(fd, piece)
    if before_close:
        before_close()
    os.close(fd)


def rewrite(v1, v2, dst):
    closing = threading.Event()
    failures = []

    def first():
        try:
            write_all(dst, read(v1), closing.set)
        except OSError as e:
            failures.append(f"first version: {e}")
            closing.set()

    t = threading.Thread(target=first)
    t.start()
    closing.wait()
    try:
        write_all(dst, read(v2))
    except OSError as e:
        failures.append(f"second version: {e}")
    t.join()
    if failures:
        sys.exit("stream_writes: " + "; ".join(failures))


def scatter(src, dst):
    data = read(src)
    header = 8 + struct.unpack("<Q", data[:8])[0]
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, data[header:], header)
    os.pwrite(fd, data[:header], 0)
    os.close(fd)


def again(src, dst):
    data = read(src)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    mid = len(data) // 3
    os.pwrite(fd, data[mid:2 * mid], mid)
    os.close(fd)


def shrink(src, dst):
    data = read(src)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data[:3 * len(data) // 4])
    os.ftruncate(fd, len(data) // 2)
    os.pwrite(fd, data[len(data) // 2:], len(data) // 2)
    os.close(fd)


def fill(src, dst):
    data = read(src)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write_error = close_error = "none"
    for off in range(0, len(data), 1 << 20):
        try:
            os.write(fd, data[off:off + (1 << 20)])
        except OSError as e:
            write_error = errno.errorcode.get(e.errno, str(e.errno))
            break
    try:
        os.close(fd)
    except OSError as e:
        close_error = errno.errorcode.get(e.errno, str(e.errno))
    print(write_error, close_error)


modes = {"make": make, "slow": slow, "rewrite": rewrite, "scatter": scatter, "again": again,
         "shrink": shrink, "fill": fill}
if len(sys.argv) < 2 or sys.argv[1] not in modes:
    sys.exit(__doc__)
modes[sys.argv[1]](*sys.argv[2:])
