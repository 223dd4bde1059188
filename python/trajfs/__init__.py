"""trajfs archives of training checkpoints, read and written in-process.

The archive is opened by the trajfs library itself (the same reader,
cache of reconstructed chunks and prefetcher as a mount), so this works
where FUSE does not: containers without /dev/fuse, notebooks, CI.

    import trajfs
    with trajfs.open("run.traj") as ar:          # or https://..., s3://...
        ar.listdir("checkpoint-400")             # DirEntry: name, kind, size, ...
        sd = ar.load("checkpoint-400/model.safetensors")             # numpy
        sd = ar.load("checkpoint-400/model.safetensors", framework="pt")
        w = ar.tensor("checkpoint-400/model.safetensors", "lm_head.weight")
        with ar.open("checkpoint-400/optimizer.pt") as f:            # seekable
            state = torch.load(f)
        ar.add("checkpoint-500", "out/checkpoint-500")               # writing

Errors are OSError with the library's message (FileNotFoundError for a
missing path, errno EIO for damaged data: never wrong bytes).
"""
import errno
import functools
import io
import json
import os
import stat as _stat
from collections import namedtuple

from . import _trajfs
from ._load import load_file, read_safetensors_header, tensor_from_file

__all__ = ["open", "create", "Archive", "ArchiveFile", "StatResult", "DirEntry"]

CHUNK_SHIFT_DEFAULT = _trajfs.CHUNK_SHIFT_DEFAULT

StatResult = namedtuple("StatResult", "kind size mode mtime_ns ino target")
StatResult.__doc__ = """An entry of the archive: kind is "file", "directory" or
"link"; mode the permission bits; target a link's target (else None)."""

DirEntry = namedtuple("DirEntry", "name path kind size mode mtime_ns ino target")

_READ_BUFFER = 1 << 20  # buffered reads of small pieces (pickles, headers)
_FORKED = []  # archives a parent process opened, left alone in a child
_INDEX_MAX = 100 << 20  # bytes of a sharded checkpoint's index, at most


def _archive_path(path):
    """An archive path: '/'-separated, relative, no trailing '/'."""
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"archive paths are str, not {type(path).__name__}")
    return path.strip("/")


def open(path, *, cache_size=None, threads=None):
    """Opens the archive at path (a file, or an http(s):// or s3:// URL)
    for reading. cache_size: bytes of reconstructed chunks kept (256 MiB);
    threads: decoding threads (one per CPU)."""
    return Archive(path, cache_size=cache_size, threads=threads)


def create(path, *, chunk_shift=CHUNK_SHIFT_DEFAULT, cache_size=None, threads=None):
    """Creates an empty archive at path (which must not exist), with
    chunks of 2**chunk_shift elements, and opens it."""
    _trajfs.add(os.fspath(path), [], None, True, chunk_shift)
    return Archive(path, cache_size=cache_size, threads=threads)


class ArchiveFile(io.RawIOBase):
    """A file of the archive, open for reading: seekable, lazy (a read
    decodes the chunks it covers). It reads the version of the file that
    was there when it was opened."""

    def __init__(self, archive, path):
        super().__init__()
        self._file = archive._handle().open_file(archive.resolve(path))
        self._pos = 0
        self.name = self._file.path

    @property
    def size(self):
        return self._file.size

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        self._checkClosed()
        n = self._file.readinto(self._pos, b)
        self._pos += n
        return n

    def readinto_at(self, offset, b, ahead=True):
        """Reads into b from offset, leaving the position as it is.
        ahead=False: decode nothing past the tensors the read covers (one
        tensor wanted), even where it continues the reads before it."""
        self._checkClosed()
        return self._file.readinto(offset, b, ahead)

    def readall(self):
        self._checkClosed()
        out = bytearray(max(self.size - self._pos, 0))
        n = self._file.readinto(self._pos, out)
        self._pos += n
        del out[n:]
        return bytes(out)

    def seek(self, offset, whence=io.SEEK_SET):
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, f"{self.name}: negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self):
        self._checkClosed()
        return self._pos

    def close(self):
        self._file = _ClosedFile(self._file)
        super().close()


class _ClosedFile:
    """What a closed ArchiveFile keeps: its name and size, not its entry."""

    def __init__(self, f):
        self.path, self.size = f.path, f.size


class Archive:
    """An archive open for reading; see trajfs.open."""

    def __init__(self, path, *, cache_size=None, threads=None):
        path = os.fspath(path)
        self._settings = (path, cache_size or 0, threads or 0)
        self._c = _trajfs.Archive(*self._settings)
        self._pid = os.getpid()
        self.path = path

    def _handle(self):
        """The open archive of this process: a child forked since it was
        opened (a DataLoader's worker) opens it again, since the parent's
        decoding threads are not there (files it had open stay the
        parent's, and fail)."""
        if self._pid != os.getpid() and not self._c.closed:
            _FORKED.append(self._c)  # never freed here: its threads' locks
            self._c = _trajfs.Archive(*self._settings)
            self._pid = os.getpid()
        return self._c

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<trajfs.Archive {self.path!r} ({state})>"

    @property
    def closed(self):
        return self._c.closed

    def close(self):
        self._handle().close()

    def refresh(self):
        """Applies the commits made since the archive was opened (by this
        process or another); True when there were any."""
        return self._handle().refresh()

    def stats(self):
        """What this archive's reader decoded so far, once the decoding
        ahead that reads started is done: blobs, their bytes, and the
        requests its cache served."""
        return self._handle().counts()

    # ---------------------------------------------------------- the tree

    def stat(self, path, follow_symlinks=False):
        """The entry at path (a link itself, unless follow_symlinks)."""
        if follow_symlinks:
            path = self.resolve(path)
        return StatResult(*self._handle().stat(_archive_path(path)))

    def resolve(self, path):
        """path with the symbolic links along it followed, as the kernel
        follows them in a mount (a link's target is relative to its
        folder; one that leaves the archive leads nowhere)."""
        todo = _archive_path(path).split("/")
        done, hops = [], 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            at = "/".join(done + [part])
            st = self.stat(at)
            if st.kind != "link":
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            if st.target.startswith("/"):
                raise OSError(errno.ENOENT, f"{at} links out of the archive", path)
            todo = st.target.split("/") + todo
        return "/".join(done)

    def _stat_followed(self, path):
        """stat(path, follow_symlinks=True), or None where that leads to
        nothing (a missing entry, a loop of links)."""
        try:
            return self.stat(path, follow_symlinks=True)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                return None
            raise

    def exists(self, path):
        """Whether path names an entry, links followed (os.path.exists)."""
        return self._stat_followed(path) is not None

    def isdir(self, path):
        st = self._stat_followed(path)
        return st is not None and st.kind == "directory"

    def isfile(self, path):
        st = self._stat_followed(path)
        return st is not None and st.kind == "file"

    def listdir(self, path="", detail=True):
        """What the directory at path ("" is the root; links followed)
        holds, in the archive's order: DirEntry tuples (name, path, kind,
        size, mode, mtime_ns, ino, target), or only the names without
        detail."""
        items = self._handle().listdir(self.resolve(path))
        if not detail:
            return [name for name, _ in items]
        path = _archive_path(path)
        prefix = path + "/" if path else ""
        return [DirEntry(name, prefix + name, *st) for name, st in items]

    def walk(self, top=""):
        """Like os.walk, top-down: (dirpath, dirnames, filenames)."""
        entries = self.listdir(top)
        dirs = [e.name for e in entries if e.kind == "directory"]
        files = [e.name for e in entries if e.kind != "directory"]
        top = _archive_path(top)
        yield top, dirs, files
        for d in dirs:
            yield from self.walk(f"{top}/{d}" if top else d)

    # ------------------------------------------------------------ reading

    def open(self, path, buffering=_READ_BUFFER):
        """A binary file object of the file at path (read-only, seekable):
        torch.load, zipfile and file-based readers take it."""
        raw = ArchiveFile(self, path)
        if buffering == 0:
            return raw
        return io.BufferedReader(raw, buffer_size=buffering)

    def read_bytes(self, path):
        with ArchiveFile(self, path) as f:
            return f.readall()

    def keys(self, path):
        """The tensor names of the safetensors file at path, or of the
        sharded checkpoint whose index (*.index.json) is at path."""
        shards = self._shards(path)
        if shards is not None:
            return list(shards)
        with ArchiveFile(self, path) as f:
            header, _ = read_safetensors_header(f)
        return [k for k in header if k != "__metadata__"]

    def metadata(self, path):
        """The __metadata__ of the safetensors file at path (or {})."""
        with ArchiveFile(self, path) as f:
            header, _ = read_safetensors_header(f)
        return dict(header.get("__metadata__") or {})

    def load(self, path, framework="np", **torch_load_args):
        """The tensors of the checkpoint at path, as {name: array}.

        safetensors files: numpy arrays (framework "np") or torch tensors
        ("pt"), all views of one buffer the file's data was decoded into,
        in parallel. A sharded checkpoint's index (*.index.json, its
        weight_map naming each tensor's shard): the tensors of all its
        shards, in the index's order. torch.save files: what torch.load
        gives (framework "pt"; torch_load_args go to it, weights_only=True
        unless given)."""
        shards = self._shards(path)
        if shards is not None:
            if torch_load_args:
                raise TypeError(f"{path}: torch.load arguments for safetensors shards")
            loaded = {}
            for shard in dict.fromkeys(shards.values()):
                with ArchiveFile(self, shard) as f:
                    loaded[shard] = load_file(f, framework, {})
            return {name: _from_shard(loaded[shard], name, shard)
                    for name, shard in shards.items()}
        with ArchiveFile(self, path) as f:
            return load_file(f, framework, torch_load_args)

    def tensor(self, path, name, framework="np"):
        """One tensor of the safetensors file at path (or of the sharded
        checkpoint whose index is at path): only its chunks (and the
        header's) are decoded."""
        shards = self._shards(path)
        if shards is not None:
            if name not in shards:
                raise KeyError(f"{path}: no tensor {name!r} in its weight_map")
            path = shards[name]
        with ArchiveFile(self, path) as f:
            return tensor_from_file(f, name, framework)

    def _shards(self, path):
        """{tensor name: archive path of its shard} of the index of a
        sharded checkpoint at path (a name ending in .index.json), or
        None for any other file."""
        if not str(path).endswith(".index.json"):
            return None
        with ArchiveFile(self, path) as f:
            if f.size > _INDEX_MAX:
                raise ValueError(f"{f.name}: an index of {f.size} bytes")
            try:
                weight_map = json.loads(f.readall())["weight_map"]
            except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{f.name}: not an index of shards ({e!r})") from None
            folder = f.name.rsplit("/", 1)[0] + "/" if "/" in f.name else ""
        if not isinstance(weight_map, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in weight_map.items()):
            raise ValueError(f"{path}: its weight_map is no object of names to shard files")
        return {name: folder + shard for name, shard in weight_map.items()}

    # ------------------------------------------------------------ writing

    def add(self, dest, src, **settings):
        """Adds src (a file, or a directory and everything below it) as
        archive path dest, one commit per file, as `trajpack add` does;
        each tensor's reference is the same tensor of the nearest earlier
        checkpoint of its run. settings are the writer's (max_chain,
        threads, prog_budget, search, all_programs). The archive is then
        refreshed. Returns the number of entries added."""
        items = _inputs(os.fspath(src), _archive_path(dest), self.path)
        try:
            return _trajfs.add(self.path, items, settings, False, 0)
        finally:  # what was committed before a failure is there too
            if not self.closed:
                self.refresh()


def _from_shard(tensors, name, shard):
    try:
        return tensors[name]
    except KeyError:
        raise KeyError(f"{shard}: no tensor {name!r}, which the index places there") from None


def _inputs(src, dest, archive):
    """(path on disk, archive path) of src and, for a directory, of what
    it holds, each directory first, names in natural order (step-900
    before step-1000); the archive itself left out. dest "" puts a
    directory's contents at the root."""
    st = os.lstat(src)
    try:
        skip = os.stat(archive)
        skip = (skip.st_dev, skip.st_ino)
    except OSError:
        skip = None
    items = []

    def visit(path, to, st):
        if skip == (st.st_dev, st.st_ino):
            return
        if to:
            items.append((path, to))
        if not _stat.S_ISDIR(st.st_mode):
            return
        with os.scandir(path) as it:
            names = sorted((e.name for e in it), key=functools.cmp_to_key(_trajfs.natcmp))
        for name in names:
            child = os.path.join(path, name)
            visit(child, f"{to}/{name}" if to else name, os.lstat(child))

    if not dest and not _stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{src}: a file needs an archive path to be added as")
    visit(src, dest, st)
    return items
