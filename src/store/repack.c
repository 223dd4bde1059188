#include "store/repack.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/full_io.h"
#include "common/tmpfile.h"
#include "format/container.h"
#include "store/catalog_query.h"
#include "store/reader.h"
#include "store/rewrite.h"
#include "store/writer.h"

#define BLOCK_BYTES (4u << 20)   /* one tf_reader_pread / write */
#define CACHE_BYTES (256u << 20) /* of the old archive: the references of the next step */

struct tf_repack {
    tf_rewrite rw;
    uint64_t file_bytes;
    /* during tf_repack_run */
    const tf_write_opts *opts;
    size_t *order;         /* entries in natural order */
    tf_reader_ctx *reader; /* of the old archive */
    int scratch;           /* the file being re-encoded, reconstructed */
    uint8_t *block;
    uint64_t files;
};

int tf_repack_open(const char *path, tf_repack **out, tf_error *e)
{
    tf_repack *rp = calloc(1, sizeof *rp);
    if (!rp)
        return tf_fail(e, ENOMEM, "out of memory");
    if (tf_rewrite_open(&rp->rw, path, "repack", ".repack-tmp", e) < 0) {
        free(rp);
        return -1;
    }
    for (size_t i = 0; i < tf_archive_nentries(rp->rw.old); i++) {
        const tf_entry *ent = tf_archive_entry(rp->rw.old, i);
        if (tf_entry_is_regular(ent))
            rp->file_bytes += ent->size;
    }
    rp->scratch = -1;
    *out = rp;
    return 0;
}

void tf_repack_close(tf_repack *rp)
{
    if (!rp)
        return;
    tf_rewrite_close(&rp->rw);
    free(rp);
}

uint64_t tf_repack_file_bytes(const tf_repack *rp)
{
    return rp->file_bytes;
}

/* The unnamed file the files are reconstructed into, in the archive's
 * directory: on disk, whatever a file's size, and gone when the process
 * is. */
static int open_scratch(tf_repack *rp, tf_error *e)
{
    char *copy = strdup(rp->rw.real);
    if (!copy)
        return tf_fail(e, ENOMEM, "out of memory");
    const char *dir = dirname(copy);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = dirfd >= 0 ? tf_tmpfile_create(dirfd, "trajpack-repack") : -errno;
    if (dirfd >= 0)
        close(dirfd);
    if (fd < 0)
        tf_fail(e, -fd, "cannot make a scratch file in %s: %s", dir, strerror(-fd));
    free(copy);
    rp->scratch = fd;
    return fd < 0 ? -1 : 0;
}

/* The bytes of the old archive's file ent, into the scratch file. */
static int reconstruct(tf_repack *rp, const tf_entry *ent, tf_error *e)
{
    if (ftruncate(rp->scratch, 0) < 0)
        return tf_fail(e, errno, "scratch file: %s", strerror(errno));
    for (uint64_t off = 0; off < ent->size;) {
        size_t want = ent->size - off < BLOCK_BYTES ? (size_t)(ent->size - off) : BLOCK_BYTES;
        ssize_t n = tf_reader_pread(rp->reader, ent, off, want, rp->block, e);
        if (n < 0) {
            tf_error_prefix(e, "cannot read %s", ent->path);
            return -1;
        }
        if ((size_t)n != want)
            return tf_fail(e, EIO, "%s: ends at byte %llu, not %llu", ent->path,
                           (unsigned long long)(off + (uint64_t)n),
                           (unsigned long long)ent->size);
        if (tf_pwrite_full(rp->scratch, rp->block, want, off) < 0)
            return tf_fail(e, errno, "scratch file: %s", strerror(errno));
        off += want;
    }
    return 0;
}

/* The old archive's inode counter, carried into the new one before any
 * entry (tf_rewrite_ino_keeper): a commit of its own. */
static int keep_ino_counter(const tf_repack *rp, const char *tmp, tf_error *e)
{
    tf_entry keeper;
    int need = tf_rewrite_ino_keeper(rp->rw.old, &keeper, e);
    if (need <= 0)
        return need;
    tf_segment seg = { .entries = &keeper, .nentries = 1 };
    tf_archive *out;
    int rc = tf_archive_open(tmp, &(tf_open_opts){ .writable = true, .check_all = true }, &out, e);
    if (rc == 0) {
        rc = tf_archive_write(out, &seg, TF_COMMIT_DURABLE, NULL, e);
        tf_archive_close(out);
    }
    tf_entry_free(&keeper);
    return rc;
}

/* Adds entry ent of the old archive, as it was, to the new one. */
static int add_entry(tf_repack *rp, tf_writer *w, const tf_entry *ent, tf_error *e)
{
    tf_entry_attrs attrs = { .ino = ent->ino, .mode = ent->mode,
                             .mtime = { .tv_sec = ent->mtime_sec,
                                        .tv_nsec = (long)ent->mtime_nsec } };
    switch (ent->kind) {
    case TF_ENTRY_DIR:
        return tf_writer_mkdir(w, ent->path, &attrs, e);
    case TF_ENTRY_SYMLINK:
        return tf_writer_symlink(w, ent->path, ent->target, &attrs, e);
    default:
        rp->files++;
        if (reconstruct(rp, ent, e) < 0)
            return -1;
        return tf_writer_add_fd(w, rp->scratch, ent->path, NULL, &attrs, e);
    }
}

/* The last regular file in natural order: its chunks will be no one's
 * reference. */
static size_t last_file(const tf_repack *rp)
{
    const tf_archive *old = rp->rw.old;
    size_t last = tf_archive_nentries(old);
    for (size_t k = 0; k < tf_archive_nentries(old); k++)
        if (tf_entry_is_regular(tf_archive_entry(old, rp->order[k])))
            last = k;
    return last;
}

static int write_archive(void *arg, const char *tmp, tf_error *e)
{
    tf_repack *rp = arg;
    tf_writer *w;
    if (keep_ino_counter(rp, tmp, e) < 0 || tf_writer_open(tmp, false, 0, rp->opts, &w, e) < 0)
        return -1;
    const tf_archive *old = rp->rw.old;
    size_t last = last_file(rp);
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < tf_archive_nentries(old); k++) {
        if (k == last)
            tf_writer_keep_references(w, false);
        rc = add_entry(rp, w, tf_archive_entry(old, rp->order[k]), e);
    }
    tf_writer_close(w);
    return rc;
}

static int check_written(void *arg, const tf_archive *written, tf_error *e)
{
    const tf_repack *rp = arg;
    return tf_rewrite_check_entries(rp->rw.old, written, e);
}

int tf_repack_run(tf_repack *rp, const tf_write_opts *opts, unsigned chunk_shift,
                  tf_repack_stats *stats, tf_error *e)
{
    struct stat before, after;
    if (tf_archive_stat(rp->rw.old, &before, e) < 0)
        return -1;
    rp->opts = opts;
    rp->files = 0;
    rp->order = tf_archive_natural_order(rp->rw.old);
    rp->reader = tf_reader_new(rp->rw.old, CACHE_BYTES);
    rp->block = malloc(BLOCK_BYTES);
    int rc = rp->order && rp->reader && rp->block ? 0 : tf_fail(e, ENOMEM, "out of memory");
    if (rc == 0)
        rc = open_scratch(rp, e);
    if (rc == 0) {
        const tf_rewrite_steps steps = { .write = write_archive, .check = check_written, .arg = rp };
        rc = tf_rewrite_replace(&rp->rw, chunk_shift ? chunk_shift
                                                     : tf_archive_chunk_shift(rp->rw.old),
                                &steps, &after, e);
    }
    if (rc == 0)
        *stats = (tf_repack_stats){ .files = rp->files,
                                    .bytes_before = (uint64_t)before.st_size,
                                    .bytes_after = (uint64_t)after.st_size,
                                    .allocated_before = tf_archive_allocated(&before),
                                    .allocated_after = tf_archive_allocated(&after) };
    if (rp->scratch >= 0)
        close(rp->scratch);
    rp->scratch = -1;
    free(rp->block);
    tf_reader_free(rp->reader);
    free(rp->order);
    rp->block = NULL;
    rp->reader = NULL;
    rp->order = NULL;
    return rc;
}
