#include "store/gc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "format/catalog.h"
#include "format/container.h"
#include "store/archive.h"
#include "store/blob_io.h"

typedef struct {
    tf_archive *old;
    uint64_t *renumber; /* per old blob: its new index + 1, 0 when dropped */
    uint64_t *order;    /* per new blob: its old index */
    uint64_t kept;
    tf_container out;
    tf_segment seg;
    void (*progress)(void *arg, uint64_t bytes);
    void *progress_arg;
} rewrite;

/* renumber's values before a blob is numbered. */
#define MARKED (UINT64_MAX - 1) /* live */
#define NUMBERING UINT64_MAX    /* live, waiting for those it needs */

/* The blobs blob i of the old archive needs to be decoded: its
 * reference and its model (+ 1, 0 for none). */
static void needs_of(const rewrite *r, uint64_t i, uint64_t need[2])
{
    const tf_blob *b = tf_archive_blob(r->old, i);
    need[0] = b->ref;
    need[1] = b->model;
}

/* Numbers blob i after the blobs it needs (depth first, with the stack
 * of n entries: a chain is acyclic and visits a blob once): the new
 * archive has references to earlier blobs only, as its one segment must,
 * also where redirects made references run to later blobs. */
static void number_after_needs(rewrite *r, uint64_t i, uint64_t *stack)
{
    size_t top = 0;
    stack[top++] = i;
    r->renumber[i] = NUMBERING;
    while (top) {
        uint64_t b = stack[top - 1], need[2];
        needs_of(r, b, need);
        bool pushed = false;
        for (int k = 0; k < 2 && !pushed; k++)
            if (need[k] && r->renumber[need[k] - 1] == MARKED) {
                r->renumber[need[k] - 1] = NUMBERING;
                stack[top++] = need[k] - 1;
                pushed = true;
            }
        if (pushed)
            continue;
        top--;
        r->order[r->kept] = b;
        r->renumber[b] = ++r->kept;
    }
}

/* Marks the blobs live entries use and, from there, the references and
 * models of marked blobs, then numbers them in an order
 * where each follows those it needs. */
static int mark_live(rewrite *r, tf_error *e)
{
    uint64_t n = tf_archive_nblobs(r->old);
    r->renumber = calloc(n ? n : 1, sizeof *r->renumber);
    r->order = calloc(n ? n : 1, sizeof *r->order);
    uint64_t *stack = calloc(n ? n : 1, sizeof *stack);
    if (!r->renumber || !r->order || !stack) {
        free(stack);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    size_t top = 0;
    for (size_t i = 0; i < tf_archive_nentries(r->old); i++) {
        const tf_entry *ent = tf_archive_entry(r->old, i);
        for (uint64_t c = 0; c < ent->nchunks; c++)
            if (!r->renumber[ent->chunks[c]]) {
                r->renumber[ent->chunks[c]] = MARKED;
                stack[top++] = ent->chunks[c];
            }
    }
    while (top) {
        uint64_t need[2];
        needs_of(r, stack[--top], need);
        for (int k = 0; k < 2; k++)
            if (need[k] && !r->renumber[need[k] - 1]) {
                r->renumber[need[k] - 1] = MARKED;
                stack[top++] = need[k] - 1;
            }
    }
    for (uint64_t i = 0; i < n; i++)
        if (r->renumber[i] == MARKED)
            number_after_needs(r, i, stack);
    free(stack);
    return 0;
}

/* Copies the payloads of the kept blobs into the new archive: first
 * those a later commit may retire and give back (tf_blob_in_retirable_run),
 * in one run whose blocks are theirs alone, then the others; a blob's
 * index and offset need not be in the same order. A damaged one stops
 * the gc, and the old archive stays as it is: a rewrite must not pass
 * damage on as if it were data (trajpack verify names the files that
 * use it). */
static int copy_blobs(rewrite *r, tf_error *e)
{
    r->seg.blobs = calloc(r->kept ? r->kept : 1, sizeof *r->seg.blobs);
    if (!r->seg.blobs)
        return tf_fail(e, ENOMEM, "out of memory");
    r->seg.nblobs = r->kept;
    tf_buf payload = { 0 };
    int rc = 0;
    for (int retirable = 1; retirable >= 0; retirable--)
        for (uint64_t k = 0; rc == 0 && k < r->kept; k++) {
            uint64_t i = r->order[k];
            tf_blob b = *tf_archive_blob(r->old, i);
            if (tf_blob_in_retirable_run(&b) != retirable)
                continue;
            rc = tf_blob_read_payload(r->old, &b, &payload, e);
            if (rc < 0)
                tf_error_prefix(e, "cannot copy blob %llu", (unsigned long long)i);
            else
                rc = (retirable ? tf_container_append_retirable : tf_container_append)(
                    &r->out, payload.data, payload.len, &b.offset, e);
            b.ref = b.ref ? r->renumber[b.ref - 1] : 0; /* both are index + 1 */
            b.model = b.model ? r->renumber[b.model - 1] : 0;
            r->seg.blobs[k] = b;
            if (rc == 0 && r->progress)
                r->progress(r->progress_arg, b.enc_len);
        }
    tf_buf_free(&payload);
    return rc;
}

/* The live entries with their chunks renumbered, after a tombstone that
 * carries the highest inode number ever given when no live entry does:
 * applied to the empty archive it removes nothing, but numbers below it
 * are never given again. */
static int copy_entries(rewrite *r, tf_error *e)
{
    size_t n = tf_archive_nentries(r->old);
    r->seg.entries = calloc(n + 1, sizeof *r->seg.entries);
    if (!r->seg.entries)
        return tf_fail(e, ENOMEM, "out of memory");
    uint64_t max_ino = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t ino = tf_archive_entry(r->old, i)->ino;
        max_ino = ino > max_ino ? ino : max_ino;
    }
    uint64_t next_ino = tf_archive_next_ino(r->old);
    if (next_ino > max_ino + 1) {
        tf_entry *keep = &r->seg.entries[r->seg.nentries++];
        *keep = (tf_entry){ .kind = TF_ENTRY_TOMBSTONE, .ino = next_ino - 1,
                            .path = strdup("inode-counter") };
        if (!keep->path)
            return tf_fail(e, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        tf_entry *ent = &r->seg.entries[r->seg.nentries++];
        if (tf_entry_clone(tf_archive_entry(r->old, i), NULL, ent, e) < 0)
            return -1;
        for (uint64_t c = 0; c < ent->nchunks; c++)
            ent->chunks[c] = r->renumber[ent->chunks[c]] - 1;
    }
    return 0;
}

/* The new archive reads back with every entry and blob. */
static int check_written(const char *tmp, const rewrite *r, tf_error *e)
{
    tf_archive *ar;
    if (tf_archive_open(tmp, NULL, &ar, e) < 0)
        return -1;
    bool ok = tf_archive_nentries(ar) == tf_archive_nentries(r->old) &&
              tf_archive_nblobs(ar) == r->kept &&
              tf_archive_next_ino(ar) == tf_archive_next_ino(r->old);
    tf_archive_close(ar);
    return ok ? 0 : tf_fail(e, EIO, "%s: the rewritten archive does not read back whole", tmp);
}

/* The old file's owner and permissions, given to the new file tmp: a gc
 * must not hand the archive to whoever ran it. */
static int copy_owner(const tf_archive *old, const char *tmp, tf_error *e)
{
    struct stat st;
    if (tf_archive_stat(old, &st, e) < 0)
        return -1;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (fd < 0)
        rc = tf_fail(e, errno, "%s: %s", tmp, strerror(errno));
    else if ((st.st_uid != geteuid() || st.st_gid != getegid()) && fchown(fd, st.st_uid, st.st_gid) < 0)
        rc = tf_fail(e, errno, "cannot give the rewritten archive its owner: %s", strerror(errno));
    else if (fchmod(fd, st.st_mode & 07777) < 0)
        rc = tf_fail(e, errno, "cannot give the rewritten archive its mode: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Writes the new archive at tmp, durable (tf_container_commit syncs). */
static int write_archive(rewrite *r, const char *tmp, tf_error *e)
{
    tf_open_opts writable = { .writable = true };
    if (tf_container_create(tmp, tf_archive_chunk_shift(r->old), e) < 0 ||
        tf_container_open(&r->out, tmp, &writable, e) < 0)
        return -1;
    tf_buf raw = { 0 };
    int rc = copy_owner(r->old, tmp, e);
    if (rc == 0)
        rc = copy_blobs(r, e);
    if (rc == 0)
        rc = copy_entries(r, e);
    if (rc == 0)
        rc = tf_segment_encode(&r->seg, &raw, e);
    if (rc == 0)
        rc = tf_container_commit(&r->out, raw.data, raw.len, r->kept, e);
    tf_buf_free(&raw);
    tf_container_close(&r->out);
    return rc;
}

/* The rename must be durable too. */
static int sync_dir_of(const char *path, tf_error *e)
{
    char *copy = strdup(path);
    if (!copy)
        return tf_fail(e, ENOMEM, "out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0
             ? 0 : tf_fail(e, errno, "cannot sync the directory of %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(copy);
    return rc;
}

static uint64_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int tf_gc(const char *path, void (*progress)(void *arg, uint64_t bytes), void *progress_arg,
          tf_gc_stats *stats, tf_error *e)
{
    char *real = realpath(path, NULL), *tmp = NULL;
    if (!real)
        return tf_fail(e, errno, "%s: %s", path, strerror(errno));
    rewrite r = { .progress = progress, .progress_arg = progress_arg };
    tf_open_opts writable = { .writable = true };
    int rc = tf_archive_open(real, &writable, &r.old, e); /* the writer's lock, held to the end */
    if (rc == 0) {
        *stats = (tf_gc_stats){ .blobs_before = tf_archive_nblobs(r.old),
                                .bytes_before = tf_archive_file_size(r.old),
                                .commits_before = tf_archive_commits(r.old) };
        rc = mark_live(&r, e);
    }
    bool nothing_to_do = rc == 0 && r.kept == stats->blobs_before && stats->commits_before <= 1;
    if (rc == 0 && !nothing_to_do && asprintf(&tmp, "%s.gc-tmp", real) < 0) {
        tmp = NULL;
        rc = tf_fail(e, ENOMEM, "out of memory");
    }
    if (tmp) {
        unlink(tmp); /* left by a gc that died: nobody else writes it under our lock */
        rc = write_archive(&r, tmp, e);
        if (rc == 0)
            rc = check_written(tmp, &r, e);
        if (rc == 0 && rename(tmp, real) < 0)
            rc = tf_fail(e, errno, "cannot rename %s to %s: %s", tmp, real, strerror(errno));
        if (rc == 0)
            rc = sync_dir_of(real, e);
        else
            unlink(tmp);
    }
    if (rc == 0) {
        stats->blobs_after = r.kept;
        stats->bytes_after = nothing_to_do ? stats->bytes_before : size_of(real);
    }
    tf_segment_free(&r.seg);
    free(r.renumber);
    free(r.order);
    tf_archive_close(r.old);
    free(tmp);
    free(real);
    return rc;
}
