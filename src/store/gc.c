#include "store/gc.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "format/catalog.h"
#include "format/container.h"
#include "store/archive.h"
#include "store/blob_io.h"
#include "store/rewrite.h"

typedef struct {
    tf_archive *old;
    uint64_t *renumber; /* per old blob: its new index + 1, 0 when dropped */
    uint64_t kept;
    tf_container out;
    tf_segment seg;
    void (*progress)(void *arg, uint64_t bytes);
    void *progress_arg;
} rewrite;

/* Marks the blobs live entries use, then, from the last blob down, the
 * references and models of marked blobs (always earlier blobs, so one
 * pass reaches them all), and numbers the marked ones in order. */
static int mark_live(rewrite *r, tf_error *e)
{
    uint64_t n = tf_archive_nblobs(r->old);
    r->renumber = calloc(n ? n : 1, sizeof *r->renumber);
    if (!r->renumber)
        return tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < tf_archive_nentries(r->old); i++) {
        const tf_entry *ent = tf_archive_entry(r->old, i);
        for (uint64_t c = 0; c < ent->nchunks; c++)
            r->renumber[ent->chunks[c]] = 1;
    }
    for (uint64_t i = n; i-- > 0;) {
        const tf_blob *b = tf_archive_blob(r->old, i);
        if (r->renumber[i] && b->ref)
            r->renumber[b->ref - 1] = 1;
        if (r->renumber[i] && b->model)
            r->renumber[b->model - 1] = 1;
    }
    for (uint64_t i = 0; i < n; i++)
        if (r->renumber[i])
            r->renumber[i] = ++r->kept;
    return 0;
}

/* Copies the payloads of the kept blobs into the new archive. A damaged
 * one stops the gc, and the old archive stays as it is: a rewrite must
 * not pass damage on as if it were data (trajpack verify names the files
 * that use it). */
static int copy_blobs(rewrite *r, tf_error *e)
{
    r->seg.blobs = calloc(r->kept ? r->kept : 1, sizeof *r->seg.blobs);
    if (!r->seg.blobs)
        return tf_fail(e, ENOMEM, "out of memory");
    tf_buf payload = { 0 };
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < tf_archive_nblobs(r->old); i++) {
        if (!r->renumber[i])
            continue;
        tf_blob b = *tf_archive_blob(r->old, i);
        rc = tf_blob_read_payload(r->old, &b, &payload, e);
        if (rc < 0)
            tf_error_prefix(e, "cannot copy blob %llu", (unsigned long long)i);
        else
            rc = tf_container_append(&r->out, payload.data, payload.len, &b.offset, e);
        b.ref = b.ref ? r->renumber[b.ref - 1] : 0; /* both are index + 1 */
        b.model = b.model ? r->renumber[b.model - 1] : 0;
        r->seg.blobs[r->seg.nblobs++] = b;
        if (rc == 0 && r->progress)
            r->progress(r->progress_arg, b.enc_len);
    }
    tf_buf_free(&payload);
    return rc;
}

/* The live entries with their chunks renumbered, after the tombstone
 * that keeps the inode counter when one is needed
 * (tf_rewrite_ino_keeper). */
static int copy_entries(rewrite *r, tf_error *e)
{
    size_t n = tf_archive_nentries(r->old);
    r->seg.entries = calloc(n + 1, sizeof *r->seg.entries);
    if (!r->seg.entries)
        return tf_fail(e, ENOMEM, "out of memory");
    int keeper = tf_rewrite_ino_keeper(r->old, &r->seg.entries[0], e);
    if (keeper < 0)
        return -1;
    r->seg.nentries = (uint64_t)keeper;
    for (size_t i = 0; i < n; i++) {
        tf_entry *ent = &r->seg.entries[r->seg.nentries++];
        if (tf_entry_clone(tf_archive_entry(r->old, i), NULL, ent, e) < 0)
            return -1;
        for (uint64_t c = 0; c < ent->nchunks; c++)
            ent->chunks[c] = r->renumber[ent->chunks[c]] - 1;
    }
    return 0;
}

/* The new archive has every live entry and every kept blob. */
static int check_written(void *arg, const tf_archive *written, tf_error *e)
{
    const rewrite *r = arg;
    if (tf_archive_nblobs(written) != r->kept)
        return tf_fail(e, EIO, "%llu blobs, not %llu",
                       (unsigned long long)tf_archive_nblobs(written), (unsigned long long)r->kept);
    return tf_rewrite_check_entries(r->old, written, e);
}

/* Writes the new archive at tmp, durable (tf_container_commit syncs). */
static int write_archive(void *arg, const char *tmp, tf_error *e)
{
    rewrite *r = arg;
    tf_open_opts writable = { .writable = true };
    if (tf_container_open(&r->out, tmp, &writable, e) < 0)
        return -1;
    tf_buf raw = { 0 };
    int rc = copy_blobs(r, e);
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

int tf_gc(const char *path, void (*progress)(void *arg, uint64_t bytes), void *progress_arg,
          tf_gc_stats *stats, tf_error *e)
{
    tf_rewrite rw;
    if (tf_rewrite_open(&rw, path, "gc", ".gc-tmp", e) < 0)
        return -1;
    rewrite r = { .old = rw.old, .progress = progress, .progress_arg = progress_arg };
    *stats = (tf_gc_stats){ .blobs_before = tf_archive_nblobs(r.old),
                            .bytes_before = tf_archive_file_size(r.old),
                            .commits_before = tf_archive_commits(r.old) };
    int rc = mark_live(&r, e);
    bool nothing_to_do = rc == 0 && r.kept == stats->blobs_before && stats->commits_before <= 1;
    struct stat after = { .st_size = (off_t)stats->bytes_before };
    if (rc == 0 && !nothing_to_do) {
        const tf_rewrite_steps steps = { .write = write_archive, .check = check_written, .arg = &r };
        rc = tf_rewrite_replace(&rw, tf_archive_chunk_shift(r.old), &steps, &after, e);
    }
    if (rc == 0) {
        stats->blobs_after = r.kept;
        stats->bytes_after = (uint64_t)after.st_size;
    }
    tf_segment_free(&r.seg);
    free(r.renumber);
    tf_rewrite_close(&rw);
    return rc;
}
