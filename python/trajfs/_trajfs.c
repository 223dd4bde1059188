/* The CPython extension: an archive opened in-process, its files read
 * through the library's reader (the same LRU cache of reconstructed
 * chunks and the same prefetcher as a mount), and files added through
 * its writer. The Python package (trajfs/__init__.py) builds the user's
 * API on these few calls; the archive format is the library's alone.
 *
 * Threads: every call that reads or decodes releases the GIL. One
 * rwlock per archive orders them against the calls that change its
 * in-memory catalog (refresh after a commit, close): entry pointers and
 * the blob table are valid only while it is held. A thread never waits
 * for the lock while holding the GIL, so a reader that holds the lock
 * and wants the GIL back always gets it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpus.h"
#include "store/archive.h"
#include "store/natsort.h"
#include "store/prefetch.h"
#include "store/reader.h"
#include "store/writer.h"

#define READ_BLOCK ((size_t)4 << 20)        /* one tf_reader_pread */
#define PREFETCH_WINDOW ((uint64_t)32 << 20) /* decoded ahead of a reader in order */
#define CACHE_DEFAULT ((size_t)256 << 20)
#define THREADS_MAX 1024

/* Raises the OSError subclass of errnum with the message msg, and path
 * as its filename when not NULL (str() shows both, however long). */
static PyObject *raise_os_error(int errnum, const char *msg, const char *path)
{
    PyObject *exc = path ? PyObject_CallFunction(PyExc_OSError, "iss", errnum, msg, path)
                         : PyObject_CallFunction(PyExc_OSError, "is", errnum, msg);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *raise_error(const tf_error *e, const char *path)
{
    return raise_os_error(e->errnum, e->msg, path);
}

/* ---------------------------------------------------------------- Archive */

typedef struct {
    PyObject_HEAD
    pthread_rwlock_t lock;
    pid_t pid; /* of the process that opened it: a child forked since
                  has none of its threads, and maybe a lock they held */
    bool closed;
    char *path;
    tf_archive *ar;
    tf_reader_ctx *reader;
    tf_prefetch *prefetch;
} ArchiveObject;

static PyTypeObject ArchiveType;

static void lock_shared(ArchiveObject *a)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_rdlock(&a->lock);
    Py_END_ALLOW_THREADS
}

static void lock_exclusive(ArchiveObject *a)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_wrlock(&a->lock);
    Py_END_ALLOW_THREADS
}

static void unlock(ArchiveObject *a)
{
    pthread_rwlock_unlock(&a->lock);
}

/* The prefetcher's threads read the blob table too. */
static void guard_hold(void *arg)
{
    pthread_rwlock_rdlock(&((ArchiveObject *)arg)->lock);
}

static void guard_release(void *arg)
{
    pthread_rwlock_unlock(&((ArchiveObject *)arg)->lock);
}

/* Whether this is the process that opened the archive. */
static bool same_process(const ArchiveObject *a)
{
    return a->pid == getpid();
}

/* Takes the lock shared; fails (ValueError) when the archive is closed,
 * or was opened by the parent of this process. */
static int lock_open(ArchiveObject *a)
{
    if (!same_process(a)) {
        PyErr_SetString(PyExc_ValueError, "the archive was opened before a fork: open it "
                                          "again in this process");
        return -1;
    }
    lock_shared(a);
    if (a->closed) {
        unlock(a);
        PyErr_SetString(PyExc_ValueError, "I/O operation on a closed archive");
        return -1;
    }
    return 0;
}

static int archive_init(ArchiveObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "path", "cache_size", "threads", NULL };
    const char *path;
    Py_ssize_t cache = 0;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|ni", kwlist, &path, &cache, &threads))
        return -1;
    if (self->path) {
        PyErr_SetString(PyExc_RuntimeError, "an Archive is initialised once");
        return -1;
    }
    if (cache < 0 || threads < 0 || threads > THREADS_MAX) {
        PyErr_Format(PyExc_ValueError, "cache_size must not be negative, threads must be 0 "
                                       "(one a CPU) to %d", THREADS_MAX);
        return -1;
    }
    size_t cache_bytes = cache ? (size_t)cache : CACHE_DEFAULT;
    self->pid = getpid();
    self->path = strdup(path);
    if (!self->path) {
        PyErr_NoMemory();
        return -1;
    }
    tf_error e;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tf_archive_open(path, NULL, &self->ar, &e);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        self->ar = NULL;
        raise_error(&e, NULL);
        return -1;
    }
    self->reader = tf_reader_new(self->ar, cache_bytes);
    tf_prefetch_guard guard = { guard_hold, guard_release, self };
    /* As a mount does: what is decoded ahead must not push out of the
     * cache what is read now. */
    uint64_t window = PREFETCH_WINDOW < cache_bytes / 4 ? PREFETCH_WINDOW : cache_bytes / 4;
    if (self->reader)
        self->prefetch = tf_prefetch_new(self->ar, self->reader,
                                         threads ? (unsigned)threads : tf_online_cpus(), window,
                                         &guard);
    if (!self->prefetch) {
        PyErr_NoMemory();
        return -1;
    }
    self->closed = false;
    return 0;
}

static PyObject *archive_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    ArchiveObject *self = (ArchiveObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    pthread_rwlock_init(&self->lock, NULL);
    self->pid = getpid();
    self->closed = true;
    return (PyObject *)self;
}

/* Frees what the archive holds. The prefetcher's threads take the lock
 * shared around their work: they are stopped with the lock not held. */
static void archive_release(ArchiveObject *self)
{
    if (!same_process(self))
        return; /* what it holds is the parent's, and stays (leaks) */
    lock_exclusive(self);
    self->closed = true;
    unlock(self);
    Py_BEGIN_ALLOW_THREADS
    tf_prefetch_free(self->prefetch);
    tf_reader_free(self->reader);
    tf_archive_close(self->ar);
    Py_END_ALLOW_THREADS
    self->prefetch = NULL;
    self->reader = NULL;
    self->ar = NULL;
}

static void archive_dealloc(ArchiveObject *self)
{
    archive_release(self);
    if (same_process(self))
        pthread_rwlock_destroy(&self->lock);
    free(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *archive_close(ArchiveObject *self, PyObject *unused)
{
    (void)unused;
    archive_release(self);
    Py_RETURN_NONE;
}

/* Looks path up: the root ("" or "/"), or an entry, and where it is in
 * the archive's order (*at, when not NULL). *ent NULL for the root.
 * Raises FileNotFoundError when there is none. */
static int find_entry(ArchiveObject *a, const char *path, const tf_entry **ent, size_t *at)
{
    while (*path == '/')
        path++;
    *ent = NULL;
    if (!*path)
        return 0;
    long i = tf_archive_find(a->ar, path);
    if (i >= 0) {
        *ent = tf_archive_entry(a->ar, (size_t)i);
        if (at)
            *at = (size_t)i;
        return 0;
    }
    tf_error e;
    snprintf(e.msg, sizeof e.msg, "no such file or directory in %s", a->path);
    raise_os_error(ENOENT, e.msg, path);
    return -1;
}

static PyObject *entry_tuple(const tf_entry *ent)
{
    /* (kind, size, mode, mtime_ns, ino, symlink target or None) */
    const char *kind = ent->kind == TF_ENTRY_DIR       ? "directory"
                       : ent->kind == TF_ENTRY_SYMLINK ? "link"
                                                        : "file";
    long long mtime_ns = (long long)ent->mtime_sec * 1000000000LL + ent->mtime_nsec;
    return Py_BuildValue("(sKIKKz)", kind, (unsigned long long)ent->size, (unsigned)ent->mode,
                         mtime_ns, (unsigned long long)ent->ino,
                         ent->kind == TF_ENTRY_SYMLINK ? ent->target : NULL);
}

static PyObject *archive_stat(ArchiveObject *self, PyObject *args)
{
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    if (lock_open(self) < 0)
        return NULL;
    const tf_entry *ent;
    PyObject *res = NULL;
    if (find_entry(self, path, &ent, NULL) == 0)
        res = ent ? entry_tuple(ent) : Py_BuildValue("(sKIKKz)", "directory", 0ULL, 0755u, 0LL,
                                                     1ULL, NULL);
    unlock(self);
    return res;
}

/* The entries directly below the directory at path, in the archive's
 * order, as (name, kind, size, mode, mtime_ns, ino, target). */
static PyObject *archive_listdir(ArchiveObject *self, PyObject *args)
{
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    if (lock_open(self) < 0)
        return NULL;
    const tf_entry *dir;
    size_t at = 0;
    PyObject *list = NULL;
    if (find_entry(self, path, &dir, &at) < 0)
        goto out;
    if (dir && dir->kind != TF_ENTRY_DIR) {
        raise_os_error(ENOTDIR, "not a directory", dir->path);
        goto out;
    }
    size_t first = 0, end = tf_archive_nentries(self->ar), prefix = 0;
    if (dir) {
        first = at + 1;
        end = at + tf_archive_subtree_len(self->ar, at);
        prefix = strlen(dir->path) + 1;
    }
    list = PyList_New(0);
    /* A directory's subtree follows it: step over the children's. */
    for (size_t i = first; list && i < end; i += tf_archive_subtree_len(self->ar, i)) {
        const tf_entry *ent = tf_archive_entry(self->ar, i);
        PyObject *t = entry_tuple(ent);
        PyObject *item = t ? Py_BuildValue("(sO)", ent->path + prefix, t) : NULL;
        Py_XDECREF(t);
        if (!item || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
out:
    unlock(self);
    return list;
}

/* Reads len bytes of ent at off into out, the prefetcher told through
 * *cur of each block read, or, without ahead, of the first only: it then
 * decodes the rest of the tensor the read starts in, and nothing after
 * (the blocks after the first would look like reads in order). With the
 * lock held and the GIL released. Returns the bytes read (short at the
 * end of the file), or -1. */
static ssize_t read_entry(ArchiveObject *a, const tf_entry *ent, tf_prefetch_cursor *cur,
                          bool ahead, uint64_t off, size_t len, uint8_t *out, tf_error *e)
{
    size_t done = 0;
    while (done < len && off + done < ent->size) {
        size_t want = len - done < READ_BLOCK ? len - done : READ_BLOCK;
        if (ahead || done == 0)
            tf_prefetch_read(a->prefetch, ent, cur, off + done, want);
        ssize_t n = tf_reader_pread(a->reader, ent, off + done, want, out + done, e);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int regular_file(const tf_entry *ent, const char *path)
{
    if (ent && tf_entry_is_regular(ent))
        return 0;
    raise_os_error(ent && ent->kind == TF_ENTRY_DIR ? EISDIR : EINVAL, "not a regular file",
                   ent ? ent->path : path);
    return -1;
}

/* ------------------------------------------------------------------- File */

/* One file of the archive, open: its entry as it was when opened (a
 * copy: a later commit that replaces the file does not change what
 * this reads), and where the prefetcher has been told it is read. */
typedef struct {
    PyObject_HEAD
    ArchiveObject *archive;
    tf_entry ent;
    bool has_ent;
    pthread_mutex_t cursor_lock;
    tf_prefetch_cursor cursor;
} FileObject;

static PyTypeObject FileType;

static PyObject *archive_open_file(ArchiveObject *self, PyObject *args)
{
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    FileObject *f = PyObject_New(FileObject, &FileType);
    if (!f)
        return NULL;
    f->archive = NULL;
    f->has_ent = false;
    pthread_mutex_init(&f->cursor_lock, NULL);
    f->cursor = (tf_prefetch_cursor){ 0 };
    if (lock_open(self) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    const tf_entry *ent;
    tf_error e;
    int rc = find_entry(self, path, &ent, NULL);
    if (rc == 0)
        rc = regular_file(ent, path);
    if (rc == 0 && tf_entry_clone(ent, NULL, &f->ent, &e) < 0)
        rc = -1, raise_error(&e, path);
    unlock(self);
    if (rc < 0) {
        Py_DECREF(f);
        return NULL;
    }
    f->has_ent = true;
    Py_INCREF(self);
    f->archive = self;
    return (PyObject *)f;
}

static void file_dealloc(FileObject *f)
{
    if (f->has_ent)
        tf_entry_free(&f->ent);
    pthread_mutex_destroy(&f->cursor_lock);
    Py_XDECREF(f->archive);
    PyObject_Free(f);
}

/* readinto(offset, buffer, ahead=True): bytes read into the writable
 * buffer from offset, fewer only at the end of the file. ahead: a read
 * that continues the file's reads in order has the prefetcher decode
 * what follows it (store/prefetch.h); False for a read of one tensor:
 * the prefetcher decodes the rest of the tensor it starts in, nothing
 * after, and the file's reads in order go on as if it had not been. */
static PyObject *file_readinto(FileObject *f, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "offset", "buffer", "ahead", NULL };
    unsigned long long off;
    Py_buffer buf;
    int ahead = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Kw*|p", kwlist, &off, &buf, &ahead))
        return NULL;
    ArchiveObject *a = f->archive;
    if (lock_open(a) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    tf_error e;
    ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    /* One cursor per file: reads of it from several threads at once
     * take turns telling the prefetcher. */
    tf_prefetch_cursor cur = { 0 };
    if (ahead) {
        pthread_mutex_lock(&f->cursor_lock);
        cur = f->cursor;
        pthread_mutex_unlock(&f->cursor_lock);
    }
    n = read_entry(a, &f->ent, &cur, ahead, off, (size_t)buf.len, buf.buf, &e);
    if (ahead) {
        pthread_mutex_lock(&f->cursor_lock);
        f->cursor = cur;
        pthread_mutex_unlock(&f->cursor_lock);
    }
    Py_END_ALLOW_THREADS
    unlock(a);
    PyBuffer_Release(&buf);
    if (n < 0)
        return raise_error(&e, f->ent.path);
    return PyLong_FromSsize_t(n);
}

static PyObject *file_get_size(FileObject *f, void *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(f->ent.size);
}

static PyObject *file_get_path(FileObject *f, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(f->ent.path);
}

static PyMethodDef file_methods[] = {
    { "readinto", (PyCFunction)(void (*)(void))file_readinto, METH_VARARGS | METH_KEYWORDS,
      "readinto(offset, buffer, ahead=True) -> int: bytes of the file read into buffer "
      "from offset; ahead: decode what follows a read in order" },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef file_getset[] = {
    { "size", (getter)file_get_size, NULL, "the file's size in bytes", NULL },
    { "path", (getter)file_get_path, NULL, "the file's path in the archive", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject FileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trajfs._trajfs.File",
    .tp_basicsize = sizeof(FileObject),
    .tp_dealloc = (destructor)file_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A file of an archive, open for reading (Archive.open_file).",
    .tp_methods = file_methods,
    .tp_getset = file_getset,
};

/* ------------------------------------------------------- Archive, cont. */

/* refresh() -> bool: applies the commits made since the archive was
 * opened or last refreshed (by this process or another). */
static PyObject *archive_refresh(ArchiveObject *self, PyObject *unused)
{
    (void)unused;
    if (lock_open(self) < 0)
        return NULL;
    unlock(self);
    lock_exclusive(self);
    if (self->closed) {
        unlock(self);
        PyErr_SetString(PyExc_ValueError, "I/O operation on a closed archive");
        return NULL;
    }
    tf_error e;
    bool changed = false;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tf_archive_refresh(self->ar, NULL, &changed, &e);
    Py_END_ALLOW_THREADS
    unlock(self);
    if (rc < 0)
        return raise_error(&e, self->path);
    return PyBool_FromLong(changed);
}

static PyObject *archive_counts(ArchiveObject *self, PyObject *unused)
{
    (void)unused;
    if (lock_open(self) < 0)
        return NULL;
    tf_reader_counts c;
    Py_BEGIN_ALLOW_THREADS
    tf_prefetch_wait(self->prefetch); /* the decoding that reads started */
    c = tf_reader_get_counts(self->reader);
    Py_END_ALLOW_THREADS
    unlock(self);
    return Py_BuildValue("{sKsKsK}", "decoded_blobs", (unsigned long long)c.decoded,
                         "decoded_bytes", (unsigned long long)c.decoded_bytes,
                         "cache_hits", (unsigned long long)c.hits);
}

static PyObject *archive_get_path(ArchiveObject *self, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(self->path ? self->path : "");
}

static PyObject *archive_get_closed(ArchiveObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->closed);
}

static PyMethodDef archive_methods[] = {
    { "close", (PyCFunction)archive_close, METH_NOARGS, "close(): frees what the archive holds" },
    { "stat", (PyCFunction)archive_stat, METH_VARARGS,
      "stat(path) -> (kind, size, mode, mtime_ns, ino, target)" },
    { "listdir", (PyCFunction)archive_listdir, METH_VARARGS,
      "listdir(path) -> [(name, (kind, size, mode, mtime_ns, ino, target))]" },
    { "open_file", (PyCFunction)archive_open_file, METH_VARARGS,
      "open_file(path) -> File: a regular file, open for reading" },
    { "refresh", (PyCFunction)archive_refresh, METH_NOARGS,
      "refresh() -> bool: applies the commits made since the last look" },
    { "counts", (PyCFunction)archive_counts, METH_NOARGS,
      "counts() -> dict: blobs and bytes decoded, cache hits, once the decoding ahead "
      "that reads started is done" },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef archive_getset[] = {
    { "path", (getter)archive_get_path, NULL, "the path or URL the archive was opened at", NULL },
    { "closed", (getter)archive_get_closed, NULL, "whether the archive is closed", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ArchiveType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trajfs._trajfs.Archive",
    .tp_basicsize = sizeof(ArchiveObject),
    .tp_dealloc = (destructor)archive_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Archive(path, cache_size=0, threads=0): an archive (a path or URL), "
              "open for reading.",
    .tp_methods = archive_methods,
    .tp_getset = archive_getset,
    .tp_init = (initproc)archive_init,
    .tp_new = archive_new,
};

/* ------------------------------------------------------------ functions */

/* Sets the writer settings of a dict {name: value} (tf_write_opts_set:
 * "threads", "max_chain", "prog_budget"; "search", "all_programs" are
 * flags, set when true). */
static int write_settings(PyObject *settings, tf_write_opts *o)
{
    if (!settings || settings == Py_None)
        return 0;
    if (!PyDict_Check(settings)) {
        PyErr_SetString(PyExc_TypeError, "settings must be a dict");
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(settings, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (!name)
            return -1;
        const char *text = NULL;
        PyObject *str = NULL;
        if (PyBool_Check(value)) {
            if (value == Py_False)
                continue;
        } else {
            str = PyObject_Str(value);
            text = str ? PyUnicode_AsUTF8(str) : NULL;
            if (!text) {
                Py_XDECREF(str);
                return -1;
            }
        }
        tf_error e;
        int rc = tf_write_opts_set(o, name, text, &e);
        Py_XDECREF(str);
        if (rc < 0) {
            if (e.errnum == ENOENT)
                PyErr_Format(PyExc_TypeError, "no writer setting %s", name);
            else
                PyErr_Format(PyExc_ValueError, "%s: %s", name, e.msg);
            return -1;
        }
    }
    return 0;
}

/* add(archive, [(src, dest), ...], settings, create, chunk_shift):
 * opens the archive as its writer (creating it with create) and adds
 * each src (a file, directory or symlink, not recursive) as archive
 * path dest, one commit each. Returns the number added. */
static PyObject *module_add(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *archive;
    PyObject *items, *settings;
    int create;
    unsigned chunk_shift;
    if (!PyArg_ParseTuple(args, "sO!OpI", &archive, &PyList_Type, &items, &settings, &create,
                          &chunk_shift))
        return NULL;
    tf_write_opts o;
    tf_write_opts_default(&o);
    if (write_settings(settings, &o) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    char **pairs = calloc((size_t)n * 2 + 1, sizeof *pairs);
    if (!pairs)
        return PyErr_NoMemory();
    PyObject *res = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *src, *dest;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(items, i), "ss", &src, &dest))
            goto out;
        pairs[2 * i] = strdup(src);
        pairs[2 * i + 1] = strdup(dest);
        if (!pairs[2 * i] || !pairs[2 * i + 1]) {
            PyErr_NoMemory();
            goto out;
        }
    }
    tf_error e;
    bool failed = false;
    Py_ssize_t added = 0;
    Py_BEGIN_ALLOW_THREADS
    tf_writer *w;
    if (tf_writer_open(archive, create, chunk_shift, &o, &w, &e) < 0) {
        failed = true;
    } else {
        for (; !failed && added < n; added++)
            failed = tf_writer_add(w, pairs[2 * added], pairs[2 * added + 1], NULL, &e) < 0;
        tf_writer_close(w);
    }
    Py_END_ALLOW_THREADS
    if (failed) /* the message names the archive or the file */
        raise_error(&e, NULL);
    else
        res = PyLong_FromSsize_t(added);
out:
    for (Py_ssize_t i = 0; i < 2 * n; i++)
        free(pairs[i]);
    free(pairs);
    return res;
}

/* natcmp(a, b) -> int: the natural order of paths the writer walks
 * directories in (step-900 before step-1000). */
static PyObject *module_natcmp(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *a, *b;
    if (!PyArg_ParseTuple(args, "ss", &a, &b))
        return NULL;
    int c = tf_natcmp(a, b);
    return PyLong_FromLong(c < 0 ? -1 : c > 0);
}

static PyMethodDef module_methods[] = {
    { "add", module_add, METH_VARARGS,
      "add(archive, [(src, dest), ...], settings, create, chunk_shift) -> int" },
    { "natcmp", module_natcmp, METH_VARARGS, "natcmp(a, b) -> -1, 0 or 1" },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trajfs._trajfs",
    .m_doc = "The trajfs library, in-process (see the trajfs package).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__trajfs(void)
{
    if (PyType_Ready(&ArchiveType) < 0 || PyType_Ready(&FileType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ArchiveType);
    Py_INCREF(&FileType);
    if (PyModule_AddObject(m, "Archive", (PyObject *)&ArchiveType) < 0 ||
        PyModule_AddObject(m, "File", (PyObject *)&FileType) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_SHIFT_MIN", TF_CHUNK_SHIFT_MIN) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_SHIFT_MAX", TF_CHUNK_SHIFT_MAX) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_SHIFT_DEFAULT", TF_CHUNK_SHIFT_DEFAULT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
