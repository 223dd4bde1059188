#include "store/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtype.h"
#include "store/commit.h"
#include "store/pipeline.h"
#include "store/writer_impl.h"

#include "store/give_back.h"
#include "store/liveness.h"
#include "store/rebase.h"

/* Of a file being added, the chunks kept for the cache until the file is
 * committed (tf_seeds): as many as the cache holds, at most this many
 * bytes (a mount's cache, for its readers too, may be much larger). */
#define WRITER_SEEDS_BYTES ((size_t)256 << 20)

static size_t cache_bytes(const tf_writer *w)
{
    return w->opts.cache_bytes ? w->opts.cache_bytes : TF_WRITE_CACHE_DEFAULT;
}

static size_t seeds_bytes(const tf_writer *w)
{
    if (w->drop_references)
        return 0;
    return cache_bytes(w) < WRITER_SEEDS_BYTES ? cache_bytes(w) : WRITER_SEEDS_BYTES;
}

/* A writer given no cache bound (trajpack's) bounds its cache by what it
 * reads again: the chunks of the last files added, the next checkpoints'
 * references (two of each series, which may alternate with others), at
 * WRITER_CACHE_FILES times the most one file gave it, between
 * WRITER_CACHE_MIN and the default. A long run of small files otherwise
 * filled the whole default with chunks never read again, and paid for
 * the memory: 1,000 checkpoints of 0.8 MB took 8% longer to write (a
 * paired ratio of 0.93 now), with 481 MiB of memory where 181 MiB do. A
 * mount's cache, which its readers share, keeps its size. */
#define WRITER_CACHE_FILES 8
#define WRITER_CACHE_MIN ((size_t)32 << 20)

static void fit_cache(tf_writer *w, size_t seed_bytes)
{
    if (w->opts.cache_bytes || seed_bytes <= w->largest_seeds)
        return;
    w->largest_seeds = seed_bytes;
    size_t bound = seed_bytes < TF_WRITE_CACHE_DEFAULT / WRITER_CACHE_FILES
                       ? WRITER_CACHE_FILES * seed_bytes
                       : TF_WRITE_CACHE_DEFAULT;
    tf_reader_set_cache_bound(w->reader, bound > WRITER_CACHE_MIN ? bound : WRITER_CACHE_MIN);
}

void tf_writer_note_give_back(tf_writer *w, const tf_error *why)
{
    if (why->errnum && !w->give_back_warned) {
        w->give_back_pending = *why;
        w->give_back_warned = true;
    }
}

void tf_writer_report_give_back(tf_writer *w)
{
    w->report.give_back = w->give_back_pending;
    w->give_back_pending = (tf_error){ 0 };
}

int tf_writer_open(const char *archive, bool create, unsigned chunk_shift,
                   const tf_write_opts *opts, tf_writer **out, tf_error *e)
{
    tf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tf_fail(e, ENOMEM, "out of memory");
    if (opts)
        w->opts = *opts;
    else
        tf_write_opts_default(&w->opts);
    unsigned version = w->opts.format_version ? w->opts.format_version : TF_FORMAT_DEFAULT;
    if (create && tf_container_create(archive, w->opts.remote, chunk_shift, version, e) < 0) {
        free(w);
        return -1;
    }
    if (w->opts.threads < 1)
        w->opts.threads = 1;
    tf_open_opts o = { .writable = true, .check_all = w->opts.whole_catalog, .remote = w->opts.remote };
    if (tf_archive_open(archive, &o, &w->ar, e) < 0) {
        free(w);
        return -1;
    }
    w->opts.remote = NULL; /* read by the open only */
    atomic_init(&w->next_ino, tf_archive_next_ino(w->ar));
    /* Each commit's writer gives back what the commit retired once it is
     * durable (tf_commit_finish). One that died in between left that
     * space in use, and only the last commit's: a writer opens the
     * archive, and so runs this, before it makes a commit, and every
     * commit before the last was followed by one, whose writer gave back
     * the earlier one's when it opened if its own writer had not. A
     * range given back twice costs a punch of a hole already there. */
    tf_error why = { 0 };
    tf_commit_give_back_last(w->ar, &why);
    tf_writer_note_give_back(w, &why);
    w->reader = tf_reader_new(w->ar, cache_bytes(w));
    w->refs = tf_ref_index_new();
    if (!w->reader || !w->refs) {
        tf_writer_close(w);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    *out = w;
    return 0;
}

int tf_writer_settle(tf_writer *w, tf_error *e)
{
    tf_container *ct = tf_archive_container(w->ar);
    bool synced;
    if (!ct->trailer_unsynced)
        return 0;
    if (tf_container_sync(ct, &synced, e) < 0) {
        tf_error_prefix(e, "commit");
        return -1;
    }
    tf_error why = { 0 };
    tf_commit_give_back_last(w->ar, &why);
    tf_writer_note_give_back(w, &why);
    return 0;
}

void tf_writer_close(tf_writer *w)
{
    if (!w)
        return;
    tf_error why;
    tf_writer_settle(w, &why);
    if (atomic_load(&w->give_back_owed))
        tf_writer_give_back_unread(w, &why); /* else gc gives it back */
    tf_pool_free(w->encoders);
    tf_ref_index_free(w->refs);
    tf_reader_free(w->reader);
    tf_archive_close(w->ar);
    free(w);
}

int tf_writer_encoders(tf_writer *w, tf_pool **out, tf_error *e)
{
    if (!w->encoders && w->opts.threads > 1 && !(w->encoders = tf_pool_new(w->opts.threads)))
        return tf_fail(e, EAGAIN, "cannot start %u encoder threads", w->opts.threads);
    *out = w->encoders;
    return 0;
}

bool tf_writer_give_back_owed(tf_writer *w)
{
    return atomic_load(&w->give_back_owed);
}

int tf_writer_give_back_unread(tf_writer *w, tf_error *e)
{
    atomic_store(&w->give_back_owed, false);
    uint8_t *live = tf_liveness(w->ar, NULL, e);
    if (!live)
        return -1;
    int kept = tf_commit_keep_open_versions(w->ar, &w->opts, live, e);
    if (kept > 0)
        atomic_store(&w->give_back_owed, true);
    int rc = kept < 0 ? -1 : tf_give_back_all(w->ar, live, e);
    free(live);
    return rc;
}

tf_archive *tf_writer_archive(tf_writer *w)
{
    return w->ar;
}

tf_reader_ctx *tf_writer_reader(tf_writer *w)
{
    return w->reader;
}

void tf_writer_keep_references(tf_writer *w, bool keep)
{
    w->drop_references = !keep;
}

uint64_t tf_writer_new_ino(tf_writer *w)
{
    return atomic_fetch_add(&w->next_ino, 1);
}

const tf_add_report *tf_writer_last_report(const tf_writer *w)
{
    return &w->report;
}

bool tf_add_report_unmatched(const tf_add_report *r)
{
    return r->tensor_file && r->run_files > 0 && r->referenced_bytes * 2 < r->tensor_bytes;
}

bool tf_add_report_warns(const tf_add_report *r)
{
    return tf_add_report_unmatched(r) || r->give_back.errnum;
}

void tf_add_report_warning(const tf_add_report *r, char *buf, size_t n)
{
    int k = 0;
    if (tf_add_report_unmatched(r))
        k = snprintf(buf, n, "references found for %.0f%% of its float tensor bytes, though its "
                     "run has %llu tensor file%s already (renamed tensors, another dtype or "
                     "another model?): the rest is stored standalone",
                     r->tensor_bytes ? 100.0 * (double)r->referenced_bytes /
                                       (double)r->tensor_bytes : 0.0,
                     (unsigned long long)r->run_files, r->run_files == 1 ? "" : "s");
    if (r->give_back.errnum && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "%s%s; the space of payloads that newer ones replaced "
                 "stays in use until `trajpack gc`", k ? "; " : "", r->give_back.msg);
    else if (k == 0 && n)
        buf[0] = '\0';
}

void tf_writer_begin_commit(tf_writer *w, tf_commit *c)
{
    tf_commit_begin(c, w->ar, &w->opts, &w->next_ino);
}

int tf_writer_end_commit(tf_writer *w, tf_commit *c, int rc, tf_error *e)
{
    if (rc != 0) {
        tf_commit_abort(c);
        return -1;
    }
    rc = tf_commit_finish(c, e);
    tf_writer_note_give_back(w, &c->give_back);
    if (c->kept_open)
        atomic_store(&w->give_back_owed, true);
    /* Space comes back by itself after a removal: the chunks that
     * referenced what the commit left dead are rebased at once (a
     * failure leaves them as they are, readable; trajpack gc tries
     * again). */
    tf_error why = { 0 };
    if (rc == 0 && c->dropped && tf_writer_rebase(w, NULL, &why) < 0)
        tf_writer_note_give_back(w, &why);
    return rc;
}

/* ---- regular files ---- */

static int add_opaque(tf_writer *w, tf_commit *c, const char *dest, const tf_entry_attrs *attrs,
                      const tf_source *src, tf_error *e)
{
    tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_FILE, attrs, e);
    if (!ent)
        return -1;
    ent->size = src->size;
    tf_span span = { .nbytes = src->size, .dtype = TF_DT_NONE };
    tf_pool *encoders = NULL;
    if (tf_writer_encoders(w, &encoders, e) < 0)
        return -1;
    return tf_encode_spans(c, &w->opts, encoders, src, w->reader, NULL, ent, &span, 1, e);
}

/* What a regular file is added as. */
typedef struct {
    const char *dest, *series_path, *parent;
    const tf_entry_attrs *attrs;
    bool empty_ok; /* an empty file may claim a format (a mount's new file) */
} add_how;

/* A regular file: a tensor file when a format recognises its content,
 * whatever its name (temporary names are common when files are copied);
 * one whose name claims a format must be a valid file of it (or, with
 * how->empty_ok, empty); anything else is stored as opaque bytes. */
static int add_file(tf_writer *w, tf_commit *c, const add_how *how, const tf_source *src,
                    tf_seeds *seeds, tf_error *e)
{
    const char *dest = how->dest, *parent = how->parent;
    uint8_t head[TF_FORMAT_HEAD_BYTES];
    size_t head_len = src->size < sizeof head ? (size_t)src->size : sizeof head;
    if (tf_source_read(src, 0, head, head_len, e) < 0)
        return -1;
    bool claimed;
    const tf_tensor_format *f = tf_tensor_format_detect(head, head_len, src->size,
                                                        how->series_path, &claimed);
    if (f && (src->size > 0 || !how->empty_ok)) {
        tf_error why = { 0 };
        if (tf_writer_add_tensor_file(w, c, f, dest, how->series_path, parent, how->attrs, src,
                                      seeds, &why) == 0)
            return 0;
        tf_seeds_free(seeds);
        if (why.errnum != EINVAL || claimed || parent) {
            if (e)
                *e = why;
            return -1;
        }
        /* Recognised but not valid: its bytes are kept as they are. A
         * fresh commit, without the half-made entry. */
        tf_commit_abort(c);
        tf_writer_begin_commit(w, c);
        if (tf_commit_parents(c, dest, e) < 0)
            return -1;
    } else if (parent) {
        return tf_fail(e, EINVAL, "%s: --parent is given, but it is not a tensor file", dest);
    }
    w->report.tensor_file = false;
    return add_opaque(w, c, dest, how->attrs, src, e);
}

/* A growing file, encoded: waits for its end, which must be where its
 * start said, and gives its entry (the commit's last) the file's final
 * permission bits and time. */
static int settle(tf_commit *c, const tf_source *src, tf_error *e)
{
    uint32_t mode;
    struct timespec mtime;
    if (src->growing->settle(src->growing->arg, src->size, &mode, &mtime, e) < 0)
        return -1;
    tf_entry *ent = &c->seg.entries[c->seg.nentries - 1];
    ent->mode = mode & 07777;
    ent->mtime_sec = mtime.tv_sec;
    ent->mtime_nsec = (uint32_t)mtime.tv_nsec;
    return 0;
}

/* Adds the regular file open as src, commits, and gives the committed
 * entry's tensor chunks to the cache. */
static int add_regular(tf_writer *w, const tf_source *src, const add_how *how, tf_error *e)
{
    tf_commit c;
    tf_seeds seeds = { .budget = seeds_bytes(w) };
    tf_writer_begin_commit(w, &c);
    int rc = tf_commit_parents(&c, how->dest, e);
    /* The file it replaces is found by the lookups of its content (a
     * file added again stores nothing new), however old. */
    const tf_entry *old = tf_archive_lookup(w->ar, how->dest);
    if (rc == 0 && old && tf_entry_is_regular(old))
        rc = tf_archive_use_reference(w->ar, old, e);
    if (rc == 0)
        rc = add_file(w, &c, how, src, &seeds, e);
    bool settled = false;
    if (rc == 0 && src->growing)
        settled = (rc = settle(&c, src, e)) == 0;
    rc = tf_writer_end_commit(w, &c, rc, e);
    tf_writer_report_give_back(w);
    if (settled)
        src->growing->release(src->growing->arg, rc == 0);
    if (rc == 0) {
        fit_cache(w, seeds.bytes);
        tf_seeds_plant(&seeds, w->reader);
    }
    tf_seeds_free(&seeds);
    return rc;
}

static int add_entry(tf_writer *w, const char *src, const char *dest, const char *parent,
                     const struct stat *st, tf_error *e)
{
    w->report = (tf_add_report){ 0 };
    tf_entry_attrs attrs = { .mode = st->st_mode & 07777, .mtime = st->st_mtim };
    if (S_ISREG(st->st_mode)) {
        int fd = open(src, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return tf_fail(e, errno, "%s: %s", src, strerror(errno));
        tf_source s = { .name = src, .fd = fd, .size = (uint64_t)st->st_size };
        add_how how = { .dest = dest, .series_path = dest, .parent = parent, .attrs = &attrs };
        int rc = add_regular(w, &s, &how, e);
        close(fd);
        return rc;
    }
    if (parent)
        return tf_fail(e, EINVAL, "%s: --parent is given, but it is not a regular file", src);
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    int rc = tf_commit_parents(&c, dest, e);
    if (rc == 0 && S_ISDIR(st->st_mode)) {
        rc = tf_commit_entry(&c, dest, TF_ENTRY_DIR, &attrs, e) ? 0 : -1;
    } else if (rc == 0 && S_ISLNK(st->st_mode)) {
        char target[TF_PATH_MAX + 1];
        ssize_t n = readlink(src, target, sizeof target);
        tf_entry *ent = NULL;
        if (n < 0 || n > TF_PATH_MAX)
            rc = tf_fail(e, n < 0 ? errno : ENAMETOOLONG, "%s: cannot read link", src);
        else if (!(ent = tf_commit_entry(&c, dest, TF_ENTRY_SYMLINK, &attrs, e)))
            rc = -1;
        else if (!(ent->target = strndup(target, (size_t)n)))
            rc = tf_fail(e, ENOMEM, "out of memory");
        else
            ent->size = (uint64_t)n;
    } else if (rc == 0) {
        rc = tf_fail(e, EINVAL, "%s: not a regular file, directory or symlink", src);
    }
    return tf_writer_end_commit(w, &c, rc, e);
}

int tf_writer_add(tf_writer *w, const char *src, const char *dest, const char *parent, tf_error *e)
{
    struct stat st;
    if (lstat(src, &st) < 0)
        return tf_fail(e, errno, "%s: %s", src, strerror(errno));
    if (tf_path_check(dest, strlen(dest), e) < 0) {
        tf_error_prefix(e, "%s", src);
        return -1;
    }
    return add_entry(w, src, dest, parent, &st, e);
}

int tf_writer_add_fd(tf_writer *w, int fd, const char *dest, const char *series_path,
                     const tf_entry_attrs *attrs, tf_error *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tf_fail(e, errno, "%s: %s", dest, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tf_fail(e, EINVAL, "%s: not a regular file", dest);
    if (tf_path_check(dest, strlen(dest), e) < 0)
        return -1;
    w->report = (tf_add_report){ 0 };
    tf_source src = { .name = dest, .fd = fd, .size = (uint64_t)st.st_size };
    add_how how = { .dest = dest, .series_path = series_path ? series_path : dest,
                    .attrs = attrs, .empty_ok = true };
    return add_regular(w, &src, &how, e);
}

/* The size a growing file's format says it will have, from its first
 * bytes. */
static int implied_size(const tf_source *src, uint64_t *size, tf_error *e)
{
    uint8_t head[TF_FORMAT_HEAD_BYTES];
    if (tf_source_read(src, 0, head, sizeof head, e) < 0)
        return -1;
    bool claimed;
    const tf_tensor_format *f = tf_tensor_format_detect(head, sizeof head, src->size, src->name,
                                                        &claimed);
    if (!f || !f->implied_size)
        return tf_fail(e, ECANCELED, "%s: its start does not tell its size", src->name);
    tf_file_source fs = tf_source_as_file(src);
    return f->implied_size(&fs, size, e);
}

int tf_writer_add_growing(tf_writer *w, const tf_growing_file *g, const char *dest,
                          const tf_entry_attrs *attrs, tf_error *e)
{
    if (tf_path_check(dest, strlen(dest), e) < 0)
        return -1;
    w->report = (tf_add_report){ 0 };
    tf_source src = { .name = dest, .fd = g->fd, .size = UINT64_MAX, .growing = g };
    if (implied_size(&src, &src.size, e) < 0)
        return -1;
    add_how how = { .dest = dest, .series_path = dest, .attrs = attrs, .empty_ok = true };
    return add_regular(w, &src, &how, e);
}
