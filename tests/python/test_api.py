#!/usr/bin/python3
"""The Python package against the files an archive was made of
(tests/shell/python_api.sh makes them and sets the environment):

    TRAJFS_TEST_SRC      the files: run/, trainer/, odd/, sharded/, handmade/,
                         latest -> run/bf16,
                         loop1 -> loop2 -> loop1, outside -> /etc/passwd
    TRAJFS_TEST_ARCHIVE  their archive (created with --chunk-shift 10)
    TRAJFS_TEST_URL      the same archive over loopback HTTP ("": left out)
    TRAJFS_TEST_TMP      scratch space
    TRAJFS_TEST_TOOLS    tests/tools (torch_same.py's comparison)
    TRAJPACK             the built trajpack
"""
import errno
import io
import json
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import threading
import unittest
import zipfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

import fsspec
import numpy as np
import torch

import trajfs
import trajfs.spec

SRC = os.environ["TRAJFS_TEST_SRC"]
ARCHIVE = os.environ["TRAJFS_TEST_ARCHIVE"]
URL = os.environ.get("TRAJFS_TEST_URL", "")
TMP = os.environ["TRAJFS_TEST_TMP"]
TRAJPACK = os.environ["TRAJPACK"]
sys.path.insert(0, os.environ["TRAJFS_TEST_TOOLS"])
from torch_same import Comparer  # noqa: E402

CHUNK_SHIFT = 10


def original_files():
    """{archive path: path on disk} of every regular file, and the set of
    directories, the archive was made of ("latest" is a symlink)."""
    files, dirs = {}, set()
    for top in ("run", "trainer", "odd", "sharded", "handmade"):
        for d, dnames, fnames in os.walk(os.path.join(SRC, top)):
            rel = os.path.relpath(d, SRC)
            dirs.add(rel)
            for f in fnames:
                files[f"{rel}/{f}"] = os.path.join(d, f)
    return files, dirs


def safetensors_tensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file on disk, parsed
    here on its own (the package's parser is what is tested)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def tensor_bytes(t):
    if isinstance(t, np.ndarray):
        return t.tobytes()
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


NUMPY_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64",
               "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32",
               "U16": "uint16", "U8": "uint8", "BOOL": "bool"}
TORCH_NAMES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
               "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
               "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}

FILES, DIRS = original_files()
SAFETENSORS = sorted(p for p in FILES if p.endswith(".safetensors"))
TORCH_FILES = sorted(p for p in FILES if p.endswith((".pt", ".pth")))
ZIPPED = [p for p in TORCH_FILES if zipfile.is_zipfile(FILES[p])]


def newest_bf16():
    return sorted((p for p in SAFETENSORS if p.startswith("run/bf16/")),
                  key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))[-1]


class TreeAndBytes(unittest.TestCase):
    def setUp(self):
        self.ar = trajfs.open(ARCHIVE)

    def tearDown(self):
        self.ar.close()

    def test_listing_matches_the_originals(self):
        seen_files, seen_dirs = {}, set()
        for d, dnames, fnames in self.ar.walk(""):
            if d:
                seen_dirs.add(d)
            for f in fnames:
                path = f"{d}/{f}" if d else f
                st = self.ar.stat(path)
                if st.kind == "file":
                    seen_files[path] = st
        self.assertEqual(set(seen_files), set(FILES))
        self.assertEqual(seen_dirs, DIRS)
        for path, st in seen_files.items():
            disk = os.stat(FILES[path])
            self.assertEqual(st.size, disk.st_size, path)
            self.assertEqual(st.mode, stat.S_IMODE(disk.st_mode), path)
            self.assertEqual(st.mtime_ns, disk.st_mtime_ns, path)
        link = self.ar.stat("latest")
        self.assertEqual((link.kind, link.target), ("link", "run/bf16"))
        self.assertEqual(self.ar.stat("").kind, "directory")
        self.assertTrue(self.ar.isdir("run/") and self.ar.isfile(SAFETENSORS[0]))
        self.assertFalse(self.ar.exists("run/nothing"))
        names = self.ar.listdir("run/bf16", detail=False)
        self.assertEqual(sorted(names), sorted(os.listdir(os.path.join(SRC, "run/bf16"))))
        detail = self.ar.listdir("run")
        self.assertIn(("bf16", "run/bf16", "directory"), [(e.name, e.path, e.kind) for e in detail])

    def test_links_are_followed_where_a_mount_follows_them(self):
        self.assertEqual(self.ar.listdir("latest", detail=False),
                         self.ar.listdir("run/bf16", detail=False))
        self.assertTrue(self.ar.listdir("latest")[0].path.startswith("latest/"))
        path = newest_bf16()
        via = "latest/" + path.rsplit("/", 1)[1]
        self.assertEqual(self.ar.resolve(via), path)
        self.assertEqual(self.ar.resolve("run/../latest/./" + path.rsplit("/", 1)[1]), path)
        with open(FILES[path], "rb") as f:
            self.assertEqual(self.ar.read_bytes(via), f.read())
        self.assertEqual(list(self.ar.load(via, framework="pt")), self.ar.keys(path))
        self.assertEqual(self.ar.stat("latest", follow_symlinks=True).kind, "directory")
        self.assertTrue(self.ar.isdir("latest") and self.ar.isfile(via))
        with self.assertRaises(OSError) as cm:
            self.ar.read_bytes("loop1/x")
        self.assertEqual(cm.exception.errno, errno.ELOOP)
        self.assertFalse(self.ar.exists("loop1") or self.ar.exists("outside"))
        with self.assertRaises(FileNotFoundError):
            self.ar.read_bytes("outside")

    def test_every_file_reads_byte_identical(self):
        for path, disk in FILES.items():
            with open(disk, "rb") as f:
                self.assertEqual(self.ar.read_bytes(path), f.read(), path)

    def test_file_objects_seek_and_read_pieces(self):
        rng = random.Random(7)
        path = newest_bf16()
        with open(FILES[path], "rb") as f:
            want = f.read()
        for buffering in (0, 4096, 1 << 20):
            with self.ar.open(path, buffering=buffering) as f:
                self.assertTrue(f.seekable() and f.readable())
                self.assertEqual(f.read(8), want[:8])
                self.assertEqual(f.tell(), 8)
                for _ in range(50):
                    off = rng.randrange(0, len(want) + 10)
                    n = rng.randrange(0, 70000)
                    self.assertEqual(f.seek(off), off)
                    self.assertEqual(f.read(n), want[off:off + n], (buffering, off, n))
                f.seek(-5, io.SEEK_END)
                self.assertEqual(f.read(), want[-5:])
                f.seek(3)
                f.seek(4, io.SEEK_CUR)
                buf = bytearray(16)
                self.assertEqual(f.readinto(buf), 16)
                self.assertEqual(bytes(buf), want[7:23])
                f.seek(0)
                self.assertEqual(f.read(), want)
                with self.assertRaises(OSError):
                    f.seek(-1)

    def test_concurrent_reads_from_threads(self):
        paths = SAFETENSORS[:6]
        errors = []

        def work(path):
            try:
                for _ in range(3):
                    with open(FILES[path], "rb") as f:
                        if self.ar.read_bytes(path) != f.read():
                            errors.append(path)
            except Exception as e:  # reported below
                errors.append(f"{path}: {e!r}")

        threads = [threading.Thread(target=work, args=(p,)) for p in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


class Tensors(unittest.TestCase):
    def setUp(self):
        self.ar = trajfs.open(ARCHIVE)

    def tearDown(self):
        self.ar.close()

    def check_loads(self, framework, dtypes, kind, dtype_of):
        """load(framework) of every safetensors file: its tensors of kind,
        each of dtype_of(its safetensors dtype), shape and bytes; a
        TypeError for a file with a dtype not in dtypes. Returns how many
        files loaded."""
        loaded = 0
        for path in SAFETENSORS:
            want = safetensors_tensors(FILES[path])
            if any(d not in dtypes for d, _, _ in want.values()):
                with self.assertRaises(TypeError, msg=path):
                    self.ar.load(path, framework=framework)
                continue
            got = self.ar.load(path, framework=framework)
            self.assertEqual(list(got), list(want), path)
            for name, (dtype, shape, data) in want.items():
                t = got[name]
                self.assertIsInstance(t, kind)
                self.assertEqual(dtype_of(t), dtypes[dtype], (path, name))
                self.assertEqual(list(t.shape), shape, (path, name))
                self.assertEqual(tensor_bytes(t), data, (path, name))
            loaded += 1
        return loaded

    def test_load_numpy_is_exact(self):
        self.assertGreater(self.check_loads("np", NUMPY_NAMES, np.ndarray, lambda t: str(t.dtype)), 3)

    def test_load_torch_is_exact(self):
        self.assertGreater(self.check_loads("pt", TORCH_NAMES, torch.Tensor, lambda t: t.dtype), 6)

    def test_loaded_tensors_share_one_buffer(self):
        sd = self.ar.load(next(p for p in SAFETENSORS if p.startswith("run/fp32/")))
        self.assertGreater(len(sd), 2)

        def owner(t):
            while t.base is not None:
                t = t.base
            return id(t)

        self.assertEqual(len({owner(t) for t in sd.values()}), 1)

    def test_one_tensor_decodes_only_its_chunks(self):
        path = newest_bf16()
        want = safetensors_tensors(FILES[path])
        size = os.path.getsize(FILES[path])
        name = max(want, key=lambda k: len(want[k][2]))
        self.assertLess(len(want[name][2]), size // 4, "the test needs a smaller tensor")
        with trajfs.open(ARCHIVE) as ar:
            t = ar.tensor(path, name, framework="pt")
            decoded = ar.stats()["decoded_bytes"]
        self.assertEqual(tensor_bytes(t), want[name][2])
        self.assertEqual(list(t.shape), want[name][1])
        self.assertEqual(tensor_bytes(self.ar.tensor(path, name) if want[name][0] in NUMPY_NAMES
                                      else t), want[name][2])
        # Its chunks, and the header's, each at most one chunk more.
        chunk = 2 << CHUNK_SHIFT
        self.assertGreaterEqual(decoded, len(want[name][2]))
        self.assertLessEqual(decoded, len(want[name][2]) + 4 * chunk + 8 * 1024,
                             f"decoded {decoded} bytes of a {size}-byte file for one tensor")
        self.assertEqual(self.ar.keys(path), list(want))
        with self.assertRaises(KeyError):
            self.ar.tensor(path, "no.such.tensor")

    def test_one_large_tensor_decodes_nothing_after_it(self):
        # Tensors of several read blocks: the blocks after the first must
        # not read as a file read in order, whose next bytes are decoded.
        path = "handmade/wide.safetensors"
        want = safetensors_tensors(FILES[path])
        with trajfs.open(ARCHIVE) as ar:
            t = ar.tensor(path, "b", framework="pt")
            decoded = ar.stats()["decoded_bytes"]
        self.assertEqual(tensor_bytes(t), want["b"][2])
        self.assertGreaterEqual(decoded, len(want["b"][2]))
        self.assertLessEqual(decoded, len(want["b"][2]) + 4 * (2 << CHUNK_SHIFT) + 8 * 1024)

    def test_metadata(self):
        found = 0
        for path in SAFETENSORS:
            with open(FILES[path], "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                meta = json.loads(f.read(n)).get("__metadata__", {})
            self.assertEqual(self.ar.metadata(path), meta, path)
            found += bool(meta)
        self.assertGreater(found, 0)

    def test_torch_load_through_open(self):
        self.assertGreater(len(TORCH_FILES), 2)
        for path in TORCH_FILES:
            want = torch.load(FILES[path], map_location="cpu")
            with self.ar.open(path) as f:
                got = torch.load(f, map_location="cpu")
            Comparer().same(want, got, path)
            Comparer().same(want, self.ar.load(path, framework="pt", weights_only=False), path)
            with self.assertRaises(ValueError):
                self.ar.load(path)  # numpy: not for torch.save files
        self.assertLess(len(ZIPPED), len(TORCH_FILES), "no file of the legacy format")
        for path in ZIPPED:
            with self.ar.open(path) as f, zipfile.ZipFile(f) as z, zipfile.ZipFile(FILES[path]) as zw:
                self.assertEqual(z.namelist(), zw.namelist())
                for member in zw.namelist():
                    self.assertEqual(z.read(member), zw.read(member), (path, member))


class Sharded(unittest.TestCase):
    def test_an_index_reads_as_its_shards(self):
        indexes = sorted(p for p in FILES if p.startswith("sharded/") and p.endswith(".index.json"))
        self.assertGreater(len(indexes), 1)
        with trajfs.open(ARCHIVE) as ar:
            for index in indexes:
                with open(FILES[index]) as f:
                    weight_map = json.load(f)["weight_map"]
                folder = index.rsplit("/", 1)[0]
                self.assertGreater(len(set(weight_map.values())), 1, index)
                want = {}
                for shard in set(weight_map.values()):
                    want.update(safetensors_tensors(FILES[f"{folder}/{shard}"]))
                self.assertEqual(ar.keys(index), list(weight_map))
                got = ar.load(index, framework="pt")
                self.assertEqual(list(got), list(weight_map))
                for name, t in got.items():
                    self.assertEqual(list(t.shape), want[name][1], (index, name))
                    self.assertEqual(tensor_bytes(t), want[name][2], (index, name))
                name = list(weight_map)[len(weight_map) // 2]
                self.assertEqual(tensor_bytes(ar.tensor(index, name, framework="pt")),
                                 want[name][2])
            with self.assertRaises(KeyError):
                ar.tensor(indexes[0], "no.such.tensor")
            with self.assertRaises(FileNotFoundError):
                ar.load("handmade/bad.index.json")
            with self.assertRaises(ValueError):
                ar.keys("handmade/junk.index.json")


class FsspecFileSystem(unittest.TestCase):
    def test_open_ls_info_cat(self):
        path = newest_bf16()
        with open(FILES[path], "rb") as f:
            want = f.read()
        with fsspec.open(f"trajfs://{path}", archive=ARCHIVE) as f:
            self.assertEqual(f.read(), want)
        fs = fsspec.filesystem("trajfs", archive=ARCHIVE)
        self.assertEqual(sorted(fs.ls("run/bf16", detail=False)),
                         sorted(f"run/bf16/{n}" for n in os.listdir(os.path.join(SRC, "run/bf16"))))
        info = fs.info(path)
        self.assertEqual((info["size"], info["type"]), (len(want), "file"))
        self.assertEqual(fs.info("run")["type"], "directory")
        self.assertEqual(fs.cat_file(path, start=100, end=5000), want[100:5000])
        self.assertEqual(fs.cat_file(path, start=-10), want[-10:])
        self.assertTrue(fs.exists(path) and not fs.exists("run/none"))
        self.assertEqual(sorted(fs.find("handmade")),
                         sorted(p for p in FILES if p.startswith("handmade/")))
        with self.assertRaises(PermissionError):
            fs.open(path, "wb")
        with self.assertRaises(FileNotFoundError):
            fs.info("run/none")


@unittest.skipUnless(URL, "built without remote archives")
class Remote(unittest.TestCase):
    def test_http_archive_reads_the_same(self):
        with trajfs.open(URL) as ar:
            self.assertEqual(sorted(ar.listdir("run/bf16", detail=False)),
                             sorted(os.listdir(os.path.join(SRC, "run/bf16"))))
            for path in (newest_bf16(), TORCH_FILES[0], SAFETENSORS[0]):
                with open(FILES[path], "rb") as f:
                    self.assertEqual(ar.read_bytes(path), f.read(), path)
            path = newest_bf16()
            sd = ar.load(path, framework="pt")
            for name, (dtype, shape, data) in safetensors_tensors(FILES[path]).items():
                self.assertEqual(tensor_bytes(sd[name]), data, name)
            with self.assertRaises(OSError):
                ar.add("x", FILES[path])

    def test_unreachable_server(self):
        with self.assertRaises(OSError):
            trajfs.open("http://127.0.0.1:1/none.traj")


class BadInput(unittest.TestCase):
    def setUp(self):
        self.ar = trajfs.open(ARCHIVE)

    def tearDown(self):
        self.ar.close()

    def test_missing_and_hostile_paths(self):
        for path in ("run/none", "../etc/passwd", "run/../../x", "a" * 5000, "run/\x01"):
            with self.assertRaises(FileNotFoundError, msg=path) as cm:
                self.ar.read_bytes(path)
            self.assertIn("no such file", str(cm.exception))
        with self.assertRaises(ValueError):
            self.ar.stat("run\x00x")
        with self.assertRaises(NotADirectoryError):
            self.ar.listdir(SAFETENSORS[0])
        with self.assertRaises(IsADirectoryError):
            self.ar.open("run")
        with self.assertRaises(TypeError):
            self.ar.stat(b"run")

    def test_not_safetensors(self):
        with self.assertRaises(ValueError) as cm:
            self.ar.load("trainer/" + next(p.split("/", 1)[1] for p in FILES
                                           if p.startswith("trainer/") and p.endswith(".json")))
        self.assertIn("not a valid safetensors file", str(cm.exception))
        with self.assertRaises(ValueError):
            self.ar.load(SAFETENSORS[0], framework="jax")

    def test_archives_that_are_not(self):
        with self.assertRaises(FileNotFoundError):
            trajfs.open(os.path.join(TMP, "none.traj"))
        junk = os.path.join(TMP, "junk.traj")
        with open(junk, "wb") as f:
            f.write(os.urandom(3000))
        with self.assertRaises(OSError) as cm:
            trajfs.open(junk)
        self.assertIn("junk.traj", str(cm.exception))
        for settings in ({"threads": 5000}, {"threads": -1}, {"cache_size": -1}):
            with self.assertRaises(ValueError, msg=settings):
                trajfs.open(ARCHIVE, **settings)
        with trajfs.open(ARCHIVE, cache_size=1, threads=1) as ar:  # a cache of two chunks
            with open(FILES[SAFETENSORS[0]], "rb") as f:
                self.assertEqual(ar.read_bytes(SAFETENSORS[0]), f.read())

    def test_closed_archive(self):
        ar = trajfs.open(ARCHIVE)
        f = ar.open(SAFETENSORS[0])
        ar.close()
        self.assertTrue(ar.closed)
        with self.assertRaises(ValueError):
            ar.listdir("")
        with self.assertRaises(ValueError):
            f.read()
        ar.close()  # again: nothing

    def test_damaged_blob_is_eio_never_wrong_bytes(self):
        damaged = os.path.join(TMP, "damaged.traj")
        shutil.copyfile(ARCHIVE, damaged)
        out = subprocess.run([TRAJPACK, "list", "--blobs", damaged], check=True,
                             capture_output=True, text=True).stdout.splitlines()[1:]
        rows = [line.split("\t") for line in out]
        blob, off, length = max(((r[0], int(r[1]), int(r[2])) for r in rows), key=lambda r: r[2])
        with open(damaged, "r+b") as f:
            f.seek(off + length // 2)
            byte = f.read(1)
            f.seek(off + length // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        failed, same = [], 0
        with trajfs.open(damaged) as ar:
            for path, disk in FILES.items():
                with open(disk, "rb") as f:
                    want = f.read()
                try:
                    got = ar.read_bytes(path)
                except OSError as e:
                    self.assertEqual(e.errno, 5, f"{path}: {e}")
                    self.assertIn(path, str(e))
                    failed.append(path)
                    if path.endswith(".safetensors"):
                        with self.assertRaises(OSError):
                            ar.load(path, framework="pt")
                    continue
                self.assertEqual(got, want, f"{path} read wrong bytes from a damaged archive")
                same += 1
        self.assertTrue(failed, f"no read met the damaged blob {blob}")
        self.assertGreater(same, 0)


class Writing(unittest.TestCase):
    def test_create_add_and_read_back(self):
        path = os.path.join(TMP, "written.traj")
        run = os.path.join(SRC, "run", "bf16")
        steps = sorted(os.listdir(run), key=lambda n: int(n.split("-")[1].split(".")[0]))
        staged = os.path.join(TMP, "staged")
        os.makedirs(staged)
        for name in steps[:-1]:
            shutil.copy2(os.path.join(run, name), staged)
        with trajfs.create(path, chunk_shift=CHUNK_SHIFT) as ar:
            self.assertEqual(ar.listdir(""), [])
            self.assertEqual(ar.add("ckpt", staged), len(steps))  # the directory and its files
            self.assertEqual(ar.listdir("ckpt", detail=False), steps[:-1])
            other = trajfs.open(path)
            self.assertEqual(ar.add(f"ckpt/{steps[-1]}", os.path.join(run, steps[-1]),
                                    max_chain=4), 1)
            self.assertTrue(other.refresh())
            for a in (ar, other):
                self.assertEqual(a.listdir("ckpt", detail=False), steps)
                for name in steps:
                    with open(os.path.join(run, name), "rb") as f:
                        self.assertEqual(a.read_bytes(f"ckpt/{name}"), f.read(), name)
            other.close()
            with self.assertRaises(ValueError):
                ar.add("x", os.path.join(run, steps[0]), max_chain="many")
            with self.assertRaises(TypeError):
                ar.add("x", os.path.join(run, steps[0]), no_such_setting=1)
            with self.assertRaises(FileNotFoundError):
                ar.add("x", os.path.join(TMP, "none"))
        subprocess.run([TRAJPACK, "verify", "-q", path], check=True, stdout=subprocess.DEVNULL)
        with self.assertRaises(FileExistsError):
            trajfs.create(path)


class Fork(unittest.TestCase):
    def test_a_forked_child_opens_the_archive_again(self):
        path = newest_bf16()
        with open(FILES[path], "rb") as f:
            want = f.read()
        with trajfs.open(ARCHIVE) as ar:
            self.assertEqual(ar.read_bytes(path), want)
            opened = ar.open(path)
            pid = os.fork()
            if pid == 0:  # a DataLoader's worker, say
                code = 3
                try:
                    code = 2 if ar.read_bytes(path) != want else 1
                    try:
                        opened.read()
                    except ValueError:  # the parent's file: not here
                        code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertEqual(opened.read(), want)
            self.assertEqual(ar.read_bytes(path), want)


class Memory(unittest.TestCase):
    @staticmethod
    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def test_loads_in_a_loop_keep_memory_flat(self):
        path = newest_bf16()
        size = os.path.getsize(FILES[path])
        with trajfs.open(ARCHIVE) as ar:
            handle = ar._handle()
            refs = sys.getrefcount(handle)
            for _ in range(20):
                ar.load(path, framework="pt")
                ar.tensor(path, ar.keys(path)[0], framework="pt")
                with ar.open(path) as f:
                    f.read()
            before = self.rss()
            for _ in range(200):
                ar.load(path, framework="pt")
                ar.tensor(path, ar.keys(path)[0], framework="pt")
                with ar.open(path) as f:
                    f.read()
            grown = self.rss() - before
            self.assertEqual(sys.getrefcount(handle), refs)
        # 200 loads of the file: a leak of one buffer each is 200 x its size.
        self.assertLess(grown, 20 * size, f"RSS grew {grown} bytes over 200 loads")


if __name__ == "__main__":
    unittest.main()
