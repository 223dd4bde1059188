"""An fsspec file system over one archive (protocol "trajfs"), read-only:

    fsspec.open("trajfs://checkpoint-400/model.safetensors", archive="run.traj")
    fs = fsspec.filesystem("trajfs", archive="run.traj"); fs.ls("checkpoint-400")

Installed with the package, it is registered by entry point; importing
this module registers it too (a package used from its source tree)."""
import fsspec
from fsspec.spec import AbstractFileSystem

from . import Archive, open as _open_archive


class TrajfsFileSystem(AbstractFileSystem):
    protocol = "trajfs"
    root_marker = ""

    def __init__(self, archive, cache_size=None, threads=None, **kwargs):
        """archive: a path or URL of an archive, or an open trajfs.Archive."""
        super().__init__(**kwargs)
        if isinstance(archive, Archive):
            self.archive = archive
        else:
            self.archive = _open_archive(archive, cache_size=cache_size, threads=threads)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("trajfs://"):
            path = path[len("trajfs://"):]
        return path.strip("/")

    def _info(self, path, st):
        return {"name": path, "size": st.size, "type": st.kind if st.kind != "link" else "other",
                "mode": st.mode, "mtime": st.mtime_ns / 1e9, "ino": st.ino,
                "destination": st.target}

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return self._info(path, self.archive.stat(path))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self.archive.stat(path)
        if st.kind != "directory":
            entries = [self._info(path, st)]
        else:
            # A DirEntry has the fields of a StatResult.
            entries = [self._info(e.path, e) for e in self.archive.listdir(path)]
        return entries if detail else [e["name"] for e in entries]

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if mode != "rb":
            raise PermissionError(f"trajfs://{path}: the trajfs file system is read-only here "
                                  "(add files with Archive.add)")
        return self.archive.open(self._strip_protocol(path))

    def cat_file(self, path, start=None, end=None, **kwargs):
        with self.archive.open(self._strip_protocol(path), buffering=0) as f:
            size = f.size
            start = 0 if start is None else (start + size if start < 0 else start)
            end = size if end is None else (end + size if end < 0 else end)
            start, end = max(0, min(start, size)), max(0, min(end, size))
            buf = bytearray(max(end - start, 0))
            n = f.readinto_at(start, buf)
            return bytes(buf[:n])

    def ukey(self, path):
        st = self.archive.stat(self._strip_protocol(path))
        return f"{st.ino}:{st.size}:{st.mtime_ns}"


fsspec.register_implementation("trajfs", TrajfsFileSystem, clobber=True)
