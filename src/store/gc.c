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
    uint64_t *order;    /* per new blob: its old index */
    uint64_t kept;
    tf_container *out; /* the new archive's */
    tf_segment seg;
    void (*progress)(void *arg, uint64_t bytes);
    void *progress_arg;
} rewrite;

/* renumber's values before a blob is numbered. */
#define MARKED (UINT64_MAX - 1) /* live */
#define NUMBERING UINT64_MAX    /* live, waiting for those it needs */

/* The blobs blob i of the old archive needs to be decoded: its
 * reference and its model (+ 1, 0 for none). */
static int needs_of(const rewrite *r, uint64_t i, uint64_t need[2], tf_error *e)
{
    tf_blob b;
    if (tf_archive_blob(r->old, i, &b, e) < 0)
        return -1;
    need[0] = b.ref;
    need[1] = b.model;
    return 0;
}

/* Numbers blob i after the blobs it needs (depth first, with the stack
 * of n entries: a chain is acyclic and visits a blob once): the new
 * archive has references to earlier blobs only, as its one segment must,
 * also where redirects made references run to later blobs. */
static int number_after_needs(rewrite *r, uint64_t i, uint64_t *stack, tf_error *e)
{
    size_t top = 0;
    stack[top++] = i;
    r->renumber[i] = NUMBERING;
    while (top) {
        uint64_t b = stack[top - 1], need[2];
        if (needs_of(r, b, need, e) < 0)
            return -1;
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
    return 0;
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
    int rc = 0;
    while (rc == 0 && top) {
        uint64_t need[2];
        rc = needs_of(r, stack[--top], need, e);
        for (int k = 0; rc == 0 && k < 2; k++)
            if (need[k] && !r->renumber[need[k] - 1]) {
                r->renumber[need[k] - 1] = MARKED;
                stack[top++] = need[k] - 1;
            }
    }
    for (uint64_t i = 0; rc == 0 && i < n; i++)
        if (r->renumber[i] == MARKED)
            rc = number_after_needs(r, i, stack, e);
    free(stack);
    return rc;
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
            tf_blob b;
            rc = tf_archive_blob(r->old, i, &b, e);
            if (rc < 0 || tf_blob_in_retirable_run(&b) != retirable)
                continue;
            rc = tf_blob_read_payload(r->old, &b, &payload, e);
            if (rc < 0)
                tf_error_prefix(e, "cannot copy blob %llu", (unsigned long long)i);
            else
                rc = (retirable ? tf_container_append_retirable : tf_container_append)(
                    r->out, payload.data, payload.len, &b.offset, e);
            b.ref = b.ref ? r->renumber[b.ref - 1] : 0; /* both are index + 1 */
            b.model = b.model ? r->renumber[b.model - 1] : 0;
            r->seg.blobs[k] = b;
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

/* Writes the new archive at tmp, durable, in one commit. */
static int write_archive(void *arg, const char *tmp, tf_error *e)
{
    rewrite *r = arg;
    tf_archive *out;
    if (tf_archive_open(tmp, &(tf_open_opts){ .writable = true, .check_all = true }, &out, e) < 0)
        return -1;
    r->out = tf_archive_container(out);
    int rc = copy_blobs(r, e);
    if (rc == 0)
        rc = copy_entries(r, e);
    if (rc == 0)
        rc = tf_archive_write(out, &r->seg, TF_COMMIT_DURABLE, NULL, e);
    tf_archive_close(out);
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
    free(r.order);
    tf_rewrite_close(&rw);
    return rc;
}
