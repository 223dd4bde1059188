#include "store/archive.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codec/codec.h"
#include "common/cpus.h"
#include "common/id_index.h"
#include "common/dtype.h"
#include "common/pool.h"
#include "format/entry_pages.h"
#include "store/archive_impl.h"
#include "store/liveness.h"

/* ---- blob table and id index ---- */

/* Builds the id index from the blob table: the slots live files need
 * (store/liveness.h), in index order, so that each id maps to its first
 * one, as when built blob by blob. A dead slot's payload may have been
 * given back: new content stored as it would read as zeros. */
static bool count_live_above(const tf_archive *ar, const uint8_t *live);

/* The id of blob slot pos, for the id index. */
static const tf_blob_id *id_of_slot(const void *ar, uint64_t pos)
{
    return tf_blob_table_id(&((const tf_archive *)ar)->blobs, pos);
}

static bool build_ids(const tf_archive *ar)
{
    id_index *x = ar->ids;
    pthread_mutex_lock(&x->lock);
    bool ok = atomic_load_explicit(&x->built, memory_order_relaxed);
    if (!ok) {
        tf_error e;
        /* A paged view reads records from its pages: the index needs
         * them all (a writer has them; a reader asking is a test). */
        if (!ar->table && archive_paged_load_table((tf_archive *)ar, &e) < 0) {
            pthread_mutex_unlock(&x->lock);
            return false;
        }
        uint8_t *live = tf_liveness(ar, NULL, &e);
        uint64_t n = 0;
        for (uint64_t i = 0; live && i < ar->nblobs; i++)
            n += (live[i] & TF_LIVE_NEEDED) != 0;
        ok = live && tf_id_index_reserve(&x->map, n, id_of_slot, ar) == 0;
        for (uint64_t i = 0; ok && i < ar->nblobs; i++)
            if (live[i] & TF_LIVE_NEEDED)
                ok = tf_id_index_put(&x->map, id_of_slot(ar, i), i, id_of_slot, ar) == 0;
        ok = ok && count_live_above(ar, live);
        free(live);
        if (ok) {
            atomic_store_explicit(&x->built, true, memory_order_release);
        } else { /* a later question tries again */
            tf_id_index_free(&x->map);
            free(x->live_above);
            x->live_above = NULL;
            x->live_cap = 0;
        }
    }
    pthread_mutex_unlock(&x->lock);
    return ok;
}

int64_t tf_archive_find_blob(const tf_archive *ar, const tf_blob_id *id)
{
    if (!ar->table && ar->view)
        return writer_view_find(ar, id);
    uint64_t idx;
    /* Out of memory for the index: not found, so the blob is stored
     * again (blobs may share an id), rather than failing the write. */
    if (!atomic_load_explicit(&ar->ids->built, memory_order_acquire) && !build_ids(ar))
        return -1;
    return tf_id_index_get(&ar->ids->map, id, id_of_slot, ar, &idx) ? (int64_t)idx : -1;
}

/* The redirect of slot idx in seg (its redirects sorted by slot), or NULL:
 * a bisection. */
static const tf_redirect *search_redirect(const tf_segment *seg, uint64_t idx)
{
    size_t lo = 0, hi = (size_t)seg->nredirects;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (seg->redirects[mid].slot == idx)
            return &seg->redirects[mid];
        if (seg->redirects[mid].slot < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The same, the slots outside the range seg redirects ruled out inline: a
 * chain walk's steps mostly lie below the slots a commit redirects (those
 * of the checkpoint before it), and the call was 7% of an open. */
static inline const tf_redirect *redirect_of(const tf_segment *seg, uint64_t idx)
{
    if (!seg || !seg->nredirects || idx < seg->redirects[0].slot ||
        idx > seg->redirects[seg->nredirects - 1].slot)
        return NULL;
    return search_redirect(seg, idx);
}

/* The blob that serves slot idx once seg (may be NULL) is applied: idx,
 * or the blob of seg that seg redirects it to. */
static uint64_t served_by(const tf_segment *seg, uint64_t idx)
{
    const tf_redirect *r = redirect_of(seg, idx);
    return r ? r->blob : idx;
}

/* Stored slot idx's record, and what the slot is to others (SLOT_*, into
 * *flags when not NULL): the table's, or, where no table holds them (a
 * writer's view of version 2), read from the pages. The check under way
 * reports a read that fails (its first, in ar->read_error), which is
 * answered by a record no check passes, of a slot not to redirect. */
static tf_blob stored_slot(const tf_archive *ar, uint64_t idx, uint8_t *flags)
{
    if (ar->table) {
        if (flags)
            *flags = ar->flags[idx];
        return tf_blob_table_get(&ar->blobs, idx);
    }
    tf_blob b;
    tf_blob_marks marks;
    tf_error e;
    if (tf_paged_blob(ar->paged, idx, &b, &marks, &e) == 0) {
        if (flags) /* a redirect's blob has no slot here: none serves another */
            *flags = (marks.flags & TF_BLOB_REDIRECTED ? SLOT_REDIRECTED : 0) |
                     (marks.flags & TF_BLOB_MODEL ? SLOT_MODEL : 0);
        return b;
    }
    tf_archive *a = (tf_archive *)ar; /* the writer's thread alone checks */
    if (!a->read_failed) {
        a->read_failed = true;
        a->read_error = e;
    }
    if (flags)
        *flags = SLOT_MODEL;
    return (tf_blob){ .raw_len = UINT64_MAX, .codec = UINT8_MAX, .dtype = UINT8_MAX };
}

/* Fields of blob idx: stored, or in seg (past the stored ones). */
static uint64_t ref_at(const tf_archive *ar, const tf_segment *seg, uint64_t idx)
{
    return idx >= ar->nblobs ? seg->blobs[idx - seg->first_blob].ref
           : ar->table       ? tf_blob_table_ref(&ar->blobs, idx)
                             : stored_slot(ar, idx, NULL).ref;
}

static uint64_t model_at(const tf_archive *ar, const tf_segment *seg, uint64_t idx)
{
    return idx >= ar->nblobs ? seg->blobs[idx - seg->first_blob].model
           : ar->table       ? tf_blob_table_model(&ar->blobs, idx)
                             : stored_slot(ar, idx, NULL).model;
}

static uint64_t raw_len_at(const tf_archive *ar, const tf_segment *seg, uint64_t idx)
{
    return idx >= ar->nblobs ? seg->blobs[idx - seg->first_blob].raw_len
           : ar->table       ? tf_blob_table_raw_len(&ar->blobs, idx)
                             : stored_slot(ar, idx, NULL).raw_len;
}

static unsigned dtype_at(const tf_archive *ar, const tf_segment *seg, uint64_t idx)
{
    return idx >= ar->nblobs ? seg->blobs[idx - seg->first_blob].dtype
           : ar->table       ? tf_blob_table_dtype(&ar->blobs, idx)
                             : stored_slot(ar, idx, NULL).dtype;
}

unsigned archive_chain_count(const tf_archive *ar, uint64_t idx)
{
    return ar->table ? ar->above[idx] : writer_view_above(ar, idx);
}

/* The chain depths of seg's blobs that the checks of seg found so far,
 * per blob of seg its depth + 1 (0: not yet), or NULL. A commit that
 * supersedes the newest checkpoint redirects each of its slots to a
 * delta of the commit: the check of the redirect and the check of the
 * delta walked the same chain, and walks were a fifth of an open. */
static uint16_t *known_depth(const tf_segment *seg, uint16_t *known, uint64_t idx)
{
    return known && idx >= seg->first_blob && idx - seg->first_blob < seg->nblobs
               ? &known[idx - seg->first_blob]
               : NULL;
}

/* Room for those of seg, none known; NULL (out of memory) only makes
 * the walks longer. */
static uint16_t *new_known_depths(const tf_segment *seg)
{
    return calloc(seg->nblobs ? seg->nblobs : 1, sizeof(uint16_t));
}

/* Number of deltas from slot idx down to a self-contained blob, once seg
 * is applied; -1 when that is more than TF_CHAIN_MAX (a chain that long,
 * or one that loops through redirects). A walk stops at a blob of seg
 * whose depth is known, and records the depth of the blob it starts at
 * when that is one of seg. */
static int chain_depth(const tf_archive *ar, const tf_segment *seg, uint16_t *known,
                       uint64_t idx)
{
    idx = served_by(seg, idx);
    uint16_t *start = known_depth(seg, known, idx);
    int depth = 0;
    for (;;) {
        uint16_t *k = known_depth(seg, known, idx);
        if (k && *k) {
            depth += *k - 1;
            break;
        }
        uint64_t ref = ref_at(ar, seg, idx);
        if (!ref)
            break;
        if (++depth > TF_CHAIN_MAX)
            return -1;
        idx = served_by(seg, ref - 1);
    }
    if (depth > TF_CHAIN_MAX)
        return -1;
    if (start)
        *start = (uint16_t)(depth + 1);
    return depth;
}

/* Checks blob idx (in seg, its references and models earlier) against
 * the archive as it is once seg is applied; known: chain_depth's. */
static int check_record(const tf_archive *ar, const tf_segment *seg, uint16_t *known,
                        uint64_t idx, const tf_blob *b, tf_error *e)
{
    const tf_codec *codec = tf_codec_get(b->codec);
    if (!codec)
        return tf_fail(e, EIO, "blob %llu: unknown codec %u", (unsigned long long)idx, b->codec);
    if (codec->delta != (b->ref != 0))
        return tf_fail(e, EIO, "blob %llu: codec %s %s a reference", (unsigned long long)idx,
                       codec->name, codec->delta ? "needs" : "takes no");
    if (b->model && !codec->fit)
        return tf_fail(e, EIO, "blob %llu: codec %s takes no model", (unsigned long long)idx,
                       codec->name);
    /* A model is decoded while its user is being decoded: it must stand
     * alone, or a chain of models would nest decodes without bound. */
    uint64_t m = b->model ? served_by(seg, b->model - 1) : 0;
    if (b->model && (ref_at(ar, seg, m) || model_at(ar, seg, m)))
        return tf_fail(e, EIO, "blob %llu: model blob %llu is not self-contained",
                       (unsigned long long)idx, (unsigned long long)(b->model - 1));
    if (b->ref) {
        uint64_t ri = b->ref - 1, r = served_by(seg, ri);
        if (raw_len_at(ar, seg, r) != b->raw_len || dtype_at(ar, seg, r) != b->dtype)
            return tf_fail(e, EIO, "blob %llu: reference blob %llu differs in size or dtype",
                           (unsigned long long)idx, (unsigned long long)ri);
        /* The depth of idx itself, 1 + that of ri: no redirect names a
         * blob of seg, and the check of a redirect to idx may have
         * found it. */
        if (chain_depth(ar, seg, known, idx) < 0)
            return tf_fail(e, EIO, "blob %llu: reference chain longer than %d",
                           (unsigned long long)idx, TF_CHAIN_MAX);
    }
    return 0;
}

static int check_blob(const tf_archive *ar, const tf_segment *seg, uint16_t *known,
                      uint64_t idx, tf_error *e)
{
    return check_record(ar, seg, known, idx, &seg->blobs[idx - seg->first_blob], e);
}

int archive_check_slot(const tf_archive *ar, uint64_t idx, tf_error *e)
{
    tf_blob b = tf_blob_table_get(&ar->blobs, idx);
    return check_record(ar, NULL, NULL, idx, &b, e);
}

static int refuse_slot(uint64_t slot, tf_error *e)
{
    return tf_fail(e, EIO, "catalog: blob %llu is a model, serves another or was "
                   "redirected: it cannot be redirected", (unsigned long long)slot);
}

/* Whether slot may be served by blob b instead of old, its blob now:
 * the same content (id, length and dtype), and a slot that may be
 * redirected (SLOT_* above). */
static int check_redirect_content(const tf_archive *ar, const tf_segment *seg, uint64_t slot,
                                  const tf_blob *b, tf_error *e)
{
    uint8_t flags;
    tf_blob old = stored_slot(ar, slot, &flags);
    if (!tf_blob_id_eq(&old.id, &b->id) || old.raw_len != b->raw_len || old.dtype != b->dtype)
        return tf_fail(e, EIO, "catalog: blob %llu redirected to a blob of other content",
                       (unsigned long long)slot);
    uint8_t refused = seg->redirects_again ? SLOT_MODEL | SLOT_TARGET : 0xff;
    if (flags & refused)
        return refuse_slot(slot, e);
    return 0;
}

/* The longest chain through slot, `depth` deltas below it and those
 * above it, within TF_CHAIN_MAX (depth -1: a longer one, or a loop). */
static int check_chain_through(const tf_archive *ar, uint64_t slot, int depth, tf_error *e)
{
    if (depth < 0 || archive_chain_count(ar, slot) + (unsigned)depth > TF_CHAIN_MAX)
        return tf_fail(e, EIO, "catalog: redirect of blob %llu makes a reference chain longer "
                       "than %d", (unsigned long long)slot, TF_CHAIN_MAX);
    return 0;
}

/* Checks redirect r of seg against the archive as it is once all of seg
 * is applied; known: chain_depth's. */
static int check_redirect(const tf_archive *ar, const tf_segment *seg, uint16_t *known,
                          const tf_redirect *r, tf_error *e)
{
    if (r->slot >= ar->nblobs || r->blob < seg->first_blob ||
        r->blob - seg->first_blob >= seg->nblobs)
        return tf_fail(e, EIO, "catalog: redirect of blob %llu out of range",
                       (unsigned long long)r->slot);
    if (check_redirect_content(ar, seg, r->slot, &seg->blobs[r->blob - seg->first_blob], e) < 0)
        return -1;
    return check_chain_through(ar, r->slot, chain_depth(ar, seg, known, r->slot), e);
}

/* Checks seg's redirects against the archive as it is once all of seg is
 * applied, seg's blobs not yet added: an apply checks them so before it
 * changes anything, and so cannot fail half way for what a check of the
 * segment let through. A slot a blob of seg names as its model stays:
 * the model must stand alone, not become a delta. */
static int check_redirects(const tf_archive *ar, const tf_segment *seg, uint16_t *known,
                           tf_error *e)
{
    for (uint64_t i = 1; i < seg->nredirects; i++)
        if (seg->redirects[i].slot <= seg->redirects[i - 1].slot)
            return tf_fail(e, EIO, "catalog: redirects not in order of their blobs");
    for (uint64_t i = 0; i < seg->nblobs; i++) {
        uint64_t model = seg->blobs[i].model;
        if (model && redirect_of(seg, model - 1))
            return refuse_slot(model - 1, e);
    }
    for (uint64_t i = 0; i < seg->nredirects; i++)
        if (check_redirect(ar, seg, known, &seg->redirects[i], e) < 0)
            return -1;
    return 0;
}

/* The chain of deltas of length `above` ends at slot idx: each slot
 * below it has at least one more above it, in counts (ar->above, or the
 * writer's live_above). Stops where that holds already (it then holds
 * further down: see add_blobs). */
void archive_raise_above(const tf_archive *ar, uint16_t *counts, uint64_t idx, unsigned above)
{
    for (unsigned steps = 0; steps <= TF_CHAIN_MAX && counts[idx] < above; steps++) {
        counts[idx] = (uint16_t)above++;
        uint64_t ref = tf_blob_table_ref(&ar->blobs, idx);
        if (!ref)
            return;
        idx = ref - 1;
    }
}

/* Makes room for the live counts of n slots (the new ones zero). */
static bool room_for_live_above(id_index *x, uint64_t used, uint64_t n)
{
    if (n <= x->live_cap)
        return true;
    uint64_t cap = x->live_cap ? x->live_cap : 1024;
    while (cap < n)
        cap *= 2;
    uint16_t *a = realloc(x->live_above, cap * sizeof *a);
    if (!a)
        return false;
    memset(a + used, 0, (cap - used) * sizeof *a);
    x->live_above = a;
    x->live_cap = cap;
    return true;
}

/* Counts the chains ending at each slot over the live slots: raising
 * from each delta carries on down the chain whenever its own count rises
 * later, so the order does not matter. */
static bool count_live_above(const tf_archive *ar, const uint8_t *live)
{
    id_index *x = ar->ids;
    if (!ar->nblobs)
        return true;
    if (!room_for_live_above(x, 0, ar->nblobs))
        return false;
    memset(x->live_above, 0, ar->nblobs * sizeof *x->live_above);
    for (uint64_t s = 0; s < ar->nblobs; s++)
        if ((live[s] & TF_LIVE_NEEDED) && tf_blob_table_ref(&ar->blobs, s))
            archive_raise_above(ar, x->live_above, tf_blob_table_ref(&ar->blobs, s) - 1,
                        x->live_above[s] + 1u);
    return true;
}

/* A delta's reference at slot idx now ends a chain of `above` (both
 * counts, the writer's while built). */
static void raise_both(tf_archive *ar, uint64_t idx, unsigned above, unsigned live_above)
{
    archive_raise_above(ar, ar->above, idx, above);
    if (atomic_load_explicit(&ar->ids->built, memory_order_relaxed))
        archive_raise_above(ar, ar->ids->live_above, idx, live_above);
}

/* Room for cap blobs in the blob table (cap >= the blobs there). */
int archive_resize_blobs(tf_archive *ar, uint64_t cap, tf_error *e)
{
    if (tf_blob_table_reserve(&ar->blobs, cap, e) < 0)
        return -1;
    uint16_t *a = realloc(ar->above, cap * sizeof *a);
    if (a)
        ar->above = a;
    uint8_t *f = realloc(ar->flags, cap * sizeof *f);
    if (f)
        ar->flags = f;
    if (!a || !f)
        return tf_fail(e, ENOMEM, "blob table: out of memory");
    return 0;
}

static int grow_blobs(tf_archive *ar, uint64_t need, tf_error *e)
{
    if (need <= ar->blobs.cap)
        return 0;
    uint64_t cap = ar->blobs.cap ? ar->blobs.cap : 1024;
    while (cap < need)
        cap *= 2;
    return archive_resize_blobs(ar, cap, e);
}

/* Appends seg's blobs; an invariant kept for raise_above: the slot a
 * delta references has a longer chain ending at it than the delta. */
static int add_blobs(tf_archive *ar, const tf_segment *seg, uint16_t *known, tf_error *e)
{
    if (seg->first_blob != ar->nblobs)
        return tf_fail(e, EIO, "catalog: segment blobs start at %llu, expected %llu",
                       (unsigned long long)seg->first_blob, (unsigned long long)ar->nblobs);
    if (grow_blobs(ar, ar->nblobs + seg->nblobs, e) < 0)
        return -1;
    id_index *x = ar->ids;
    bool built = atomic_load_explicit(&x->built, memory_order_relaxed);
    if (built && !room_for_live_above(x, ar->nblobs, ar->nblobs + seg->nblobs))
        return tf_fail(e, ENOMEM, "blob table: out of memory");
    for (uint64_t i = 0; i < seg->nblobs; i++) {
        uint64_t idx = ar->nblobs;
        const tf_blob *b = &seg->blobs[i];
        if (tf_blob_table_set(&ar->blobs, idx, b, e) < 0)
            return -1;
        ar->nblobs++;
        ar->above[idx] = 0;
        ar->flags[idx] = 0;
        if (check_blob(ar, seg, known, idx, e) < 0) {
            ar->nblobs--;
            return -1;
        }
        /* A blob that only serves a slot (format version 2) is named by
         * no one once applied: the slot keeps its id. */
        if (built && i < seg->nblobs - seg->nserving &&
            tf_id_index_put(&x->map, &b->id, idx, id_of_slot, ar) < 0)
            return tf_fail(e, ENOMEM, "blob index: out of memory");
        if (b->model)
            ar->flags[b->model - 1] |= SLOT_MODEL;
        if (b->ref)
            raise_both(ar, b->ref - 1, 1, 1);
    }
    return 0;
}

/* Only a writer gives retired payloads back, those of the commit it
 * just made (or, at its open, of the last one, again): the others count
 * their bytes (on the 1,000 small checkpoints, the ranges of every
 * commit were a tenth of the memory of an open). */
static int add_retired(tf_archive *ar, const tf_blob *old, tf_error *e)
{
    ar->retired_bytes += old->enc_len;
    if (!ar->c.writable)
        return 0;
    if (ar->nretired == ar->retired_cap) {
        size_t cap = ar->retired_cap ? 2 * ar->retired_cap : 64;
        tf_archive_range *r = realloc(ar->retired, cap * sizeof *r);
        if (!r)
            return tf_fail(e, ENOMEM, "out of memory");
        ar->retired = r;
        ar->retired_cap = cap;
    }
    ar->retired[ar->nretired++] = (tf_archive_range){ old->offset, old->enc_len };
    return 0;
}

/* Serves each redirected slot by its new blob (seg's blobs added, its
 * redirects checked by check_redirects); the slot's old payload is
 * retired. */
static int apply_redirects(tf_archive *ar, const tf_segment *seg, tf_error *e)
{
    for (uint64_t i = 0; i < seg->nredirects; i++) {
        const tf_redirect *r = &seg->redirects[i];
        tf_blob old = tf_blob_table_get(&ar->blobs, r->slot);
        tf_blob now = tf_blob_table_get(&ar->blobs, r->blob);
        if (add_retired(ar, &old, e) < 0 || tf_blob_table_set(&ar->blobs, r->slot, &now, e) < 0)
            return -1;
        ar->flags[r->slot] |= SLOT_REDIRECTED;
        ar->flags[r->blob] |= SLOT_TARGET;
        if (now.ref)
            raise_both(ar, now.ref - 1, ar->above[r->slot] + 1u,
                       atomic_load_explicit(&ar->ids->built, memory_order_relaxed)
                           ? ar->ids->live_above[r->slot] + 1u
                           : 0);
    }
    return 0;
}

/* ---- entries ---- */

/* Each chunk blob must hold exactly the bytes its place in the file says,
 * so reads can copy without further checks. Its dtype is only what its
 * codec was told: a chunk may share the blob of equal bytes stored for a
 * tensor of another dtype. */
static int check_chunk(const tf_archive *ar, const tf_segment *seg, const tf_entry *ent,
                       uint64_t chunk, uint64_t want, tf_error *e)
{
    uint64_t have = raw_len_at(ar, seg, served_by(seg, ent->chunks[chunk]));
    if (have != want)
        return tf_fail(e, EIO, "catalog: \"%s\" chunk %llu has %llu bytes, expected %llu",
                       ent->path, (unsigned long long)chunk, (unsigned long long)have,
                       (unsigned long long)want);
    return 0;
}

static int check_span(const tf_archive *ar, const tf_segment *seg, const tf_entry *ent,
                      uint64_t first, uint64_t nbytes, unsigned dtype, tf_error *e)
{
    uint64_t chunk_bytes = (uint64_t)tf_dtype_get(dtype)->size << ar->c.chunk_shift;
    for (uint64_t i = first; nbytes; i++) {
        uint64_t want = nbytes < chunk_bytes ? nbytes : chunk_bytes;
        if (check_chunk(ar, seg, ent, i, want, e) < 0)
            return -1;
        nbytes -= want;
    }
    return 0;
}

int archive_check_entry(const tf_archive *ar, const tf_segment *seg, const tf_entry *ent,
                        tf_error *e)
{
    if (ent->kind == TF_ENTRY_FILE)
        return check_span(ar, seg, ent, 0, ent->size, TF_DT_NONE, e);
    if (!tf_entry_is_tensor_file(ent))
        return 0;
    if (!ent->verbatim && check_span(ar, seg, ent, 0, ent->verbatim_len, TF_DT_NONE, e) < 0)
        return -1;
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        if (check_span(ar, seg, ent, ts->first_chunk, ts->nbytes, ts->dtype, e) < 0)
            return -1;
    }
    return 0;
}

/* A check of a writer's view that could not read a record: its error. */
static int read_failure(const tf_archive *ar, int rc, tf_error *e)
{
    tf_archive *a = (tf_archive *)ar; /* the writer's thread alone checks */
    if (a->read_failed) {
        *e = a->read_error;
        rc = -1;
    }
    a->read_failed = false;
    return rc;
}

int tf_archive_check_segment(const tf_archive *ar, const tf_segment *seg, tf_error *e)
{
    if (seg->first_blob != ar->nblobs)
        return tf_fail(e, EIO, "catalog: segment blobs start at %llu, expected %llu",
                       (unsigned long long)seg->first_blob, (unsigned long long)ar->nblobs);
    ((tf_archive *)ar)->read_failed = false;
    uint16_t *known = new_known_depths(seg);
    int rc = check_redirects(ar, seg, known, e);
    for (uint64_t i = 0; rc == 0 && i < seg->nblobs; i++)
        rc = check_blob(ar, seg, known, ar->nblobs + i, e);
    free(known);
    for (uint64_t i = 0; rc == 0 && i < seg->nentries; i++)
        rc = archive_check_entry(ar, seg, &seg->entries[i], e);
    return read_failure(ar, rc, e);
}

/* Binary search; returns the index of path or, negated minus one, where it
 * would be inserted. */
static long search(const tf_archive *ar, const char *path)
{
    size_t lo = 0, hi = ar->nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tf_path_cmp(ar->entries[mid].path, path);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

size_t tf_archive_subtree_len(const tf_archive *ar, size_t i)
{
    size_t plen = strlen(ar->entries[i].path), j = i + 1;
    while (j < ar->nentries && strncmp(ar->entries[j].path, ar->entries[i].path, plen) == 0 &&
           ar->entries[j].path[plen] == '/')
        j++;
    return j - i;
}

/* An entry the index drops, or a tombstone it took. */
static void drop_entry(const tf_archive *ar, tf_entry *ent)
{
    if (!ar->borrowed)
        tf_entry_free(ent);
}

static void remove_entries(tf_archive *ar, size_t i, size_t n)
{
    for (size_t k = i; k < i + n; k++)
        drop_entry(ar, &ar->entries[k]);
    memmove(&ar->entries[i], &ar->entries[i + n], (ar->nentries - i - n) * sizeof *ar->entries);
    ar->nentries -= n;
}

/* Takes ownership of *ent (unless the index is borrowed). A new entry
 * replaces one at the same path; a tombstone removes the path and
 * everything below it. */
int archive_put_entry(tf_archive *ar, tf_entry *ent, tf_error *e)
{
    long at = search(ar, ent->path);
    if (ent->kind == TF_ENTRY_TOMBSTONE) {
        if (at >= 0)
            remove_entries(ar, (size_t)at, tf_archive_subtree_len(ar, (size_t)at));
        drop_entry(ar, ent);
        return 0;
    }
    if (at >= 0) {
        size_t i = (size_t)at;
        /* A directory replaced by a file loses its subtree. */
        if (ent->kind != TF_ENTRY_DIR && tf_archive_subtree_len(ar, i) > 1)
            remove_entries(ar, i + 1, tf_archive_subtree_len(ar, i) - 1);
        drop_entry(ar, &ar->entries[i]);
        ar->entries[i] = *ent;
        *ent = (tf_entry){ 0 };
        return 0;
    }
    if (ar->nentries == ar->entries_cap) {
        size_t cap = ar->entries_cap ? ar->entries_cap * 2 : 64;
        tf_entry *n = realloc(ar->entries, cap * sizeof *n);
        if (!n)
            return tf_fail(e, ENOMEM, "catalog: out of memory");
        ar->entries = n;
        ar->entries_cap = cap;
    }
    size_t i = (size_t)(-at - 1);
    memmove(&ar->entries[i + 1], &ar->entries[i], (ar->nentries - i) * sizeof *ar->entries);
    ar->entries[i] = *ent;
    ar->nentries++;
    *ent = (tf_entry){ 0 };
    return 0;
}

uint64_t archive_next_ino_after(const tf_archive *ar, const tf_segment *seg)
{
    uint64_t next = ar->next_ino;
    for (uint64_t i = 0; i < seg->nentries; i++)
        if (seg->entries[i].ino >= next)
            next = seg->entries[i].ino + 1;
    return next;
}

/* A writer without the table (version 2) applies what the pages, which
 * hold the commit already, do not: its counts, the payloads its
 * redirects retired (read before it wrote them), its view's lookups.
 * tf_archive_check_segment checked it against the pages before. */
static int apply_to_view(tf_archive *ar, const tf_segment *seg, tf_error *e)
{
    if (seg->first_blob != ar->nblobs)
        return tf_fail(e, EIO, "catalog: segment blobs start at %llu, expected %llu",
                       (unsigned long long)seg->first_blob, (unsigned long long)ar->nblobs);
    if (seg->nredirects && !ar->written_retired)
        return tf_fail(e, EINVAL, "catalog: a commit applied before it was written");
    for (uint64_t i = 0; i < seg->nredirects; i++) {
        tf_blob old = { .offset = ar->written_retired[2 * i],
                        .enc_len = ar->written_retired[2 * i + 1] };
        if (add_retired(ar, &old, e) < 0)
            return -1;
    }
    ar->nblobs += seg->nblobs;
    return writer_view_applied(ar, seg, e);
}

static int apply_entry(tf_archive *ar, tf_entry *ent, tf_error *e)
{
    /* Without the table the commit's pages read already, and its check
     * checked its entries. */
    if (ent->kind != TF_ENTRY_TOMBSTONE && ar->table && archive_check_entry(ar, NULL, ent, e) < 0)
        return -1;
    return archive_put_entry(ar, ent, e);
}

bool tf_entry_same_version(const tf_entry *a, const tf_entry *b)
{
    return a->ino == b->ino && b->kind != TF_ENTRY_TOMBSTONE && tf_entry_same_chunks(a, b);
}

static int cmp_range(const void *a, const void *b)
{
    uint64_t x = ((const tf_archive_range *)a)->off, y = ((const tf_archive_range *)b)->off;
    return x < y ? -1 : x > y;
}

/* The end of the run of ranges in offset order that starts at from. */
static size_t run_end(const tf_archive_range *r, size_t from, size_t n)
{
    size_t i = from + 1;
    while (i < n && r[i - 1].off <= r[i].off)
        i++;
    return i;
}

/* Ranges come mostly in order (payloads by slot, which a commit appends
 * in order, its redirects' after its own), so this merges the runs in
 * order that they hold, a pass halving their number: O(n log runs).
 * In `trajpack rm` of one checkpoint of an archive of 400,000 blobs,
 * qsort's O(n log n) took 15.7% of the samples, this 5.7%. */
void tf_archive_ranges_sort(tf_archive_range *r, size_t n)
{
    if (n < 2 || run_end(r, 0, n) == n)
        return;
    tf_archive_range *buf = malloc(n * sizeof *buf);
    if (!buf) {
        qsort(r, n, sizeof *r, cmp_range);
        return;
    }
    tf_archive_range *src = r, *dst = buf;
    for (size_t runs = 0; runs != 1;) {
        size_t out = 0;
        runs = 0;
        for (size_t a = 0; a < n; runs++) {
            size_t b = run_end(src, a, n), c = b < n ? run_end(src, b, n) : n, i = a, j = b;
            while (i < b && j < c)
                dst[out++] = src[j].off < src[i].off ? src[j++] : src[i++];
            while (i < b)
                dst[out++] = src[i++];
            while (j < c)
                dst[out++] = src[j++];
            a = c;
        }
        tf_archive_range *t = src;
        src = dst;
        dst = t;
    }
    if (src != r)
        memcpy(r, src, n * sizeof *r);
    free(buf);
}

/* Whether seg gives the file ent a live entry with the same chunks (a
 * move, new times or mode). */
static bool keeps_file(const tf_segment *seg, const tf_entry *ent)
{
    for (uint64_t i = 0; i < seg->nentries; i++)
        if (tf_entry_same_version(ent, &seg->entries[i]))
            return true;
    return false;
}

bool tf_archive_segment_drops(const tf_archive *ar, const tf_segment *seg)
{
    /* A slot served by a blob that needs others: they may be needed by
     * it alone. */
    for (uint64_t i = 0; i < seg->nredirects; i++) {
        uint64_t slot = seg->redirects[i].slot;
        if (slot < ar->nblobs && (ref_at(ar, NULL, slot) || model_at(ar, NULL, slot)))
            return true;
    }
    for (uint64_t i = 0; i < seg->nentries; i++) {
        const tf_entry *ent = &seg->entries[i];
        long at = search(ar, ent->path);
        if (at < 0)
            continue;
        /* A directory added again keeps its subtree; anything else
         * removes or replaces the path with its subtree. */
        size_t n = ent->kind == TF_ENTRY_DIR ? 1 : tf_archive_subtree_len(ar, (size_t)at);
        for (size_t k = (size_t)at; k < (size_t)at + n; k++)
            if (tf_entry_is_regular(&ar->entries[k]) && !keeps_file(seg, &ar->entries[k]))
                return true;
    }
    return false;
}

/* The id index names live slots only: after a commit that may have left
 * some dead, the next lookup builds it again. */
static void forget_ids(tf_archive *ar)
{
    tf_id_index_free(&ar->ids->map);
    free(ar->ids->live_above);
    ar->ids->live_above = NULL;
    ar->ids->live_cap = 0;
    atomic_store_explicit(&ar->ids->built, false, memory_order_relaxed);
}

int tf_archive_prepare(tf_archive *ar, tf_segment *seg, tf_error *e)
{
    return ar->paged ? archive_paged_prepare(ar, seg, e) : 0;
}

int tf_archive_write(tf_archive *ar, tf_segment *seg, tf_commit_mode mode, bool *previous_synced,
                     tf_error *e)
{
    if (ar->paged)
        return archive_paged_commit(ar, seg, mode, previous_synced, e);
    tf_buf raw = { 0 };
    int rc = tf_segment_encode(seg, &raw, e);
    if (rc == 0)
        rc = tf_container_commit(&ar->c, raw.data, raw.len, seg->first_blob + seg->nblobs, mode,
                                 previous_synced, e);
    tf_buf_free(&raw);
    return rc;
}

int tf_archive_apply(tf_archive *ar, tf_segment *seg, tf_error *e)
{
    ar->nretired = 0;
    int rc;
    if (ar->table) {
        if (atomic_load_explicit(&ar->ids->built, memory_order_relaxed) &&
            tf_archive_segment_drops(ar, seg))
            forget_ids(ar);
        uint16_t *known = new_known_depths(seg);
        rc = check_redirects(ar, seg, known, e);
        if (rc == 0)
            rc = add_blobs(ar, seg, known, e);
        free(known);
        if (rc == 0)
            rc = apply_redirects(ar, seg, e);
    } else {
        rc = apply_to_view(ar, seg, e);
    }
    free(ar->written_retired);
    ar->written_retired = NULL;
    if (rc == 0)
        ar->next_ino = archive_next_ino_after(ar, seg);
    for (uint64_t i = 0; rc == 0 && i < seg->nentries; i++)
        rc = apply_entry(ar, &seg->entries[i], e);
    if (rc == 0)
        ar->commits++;
    if (rc == 0 && ar->paged)
        archive_paged_applied(ar, seg);
    tf_segment_free(seg); /* entries already moved out are zeroed */
    return rc;
}

/* Every entry's parent directory must exist, or the tree is not a tree. */
static int check_parents(const tf_archive *ar, tf_error *e)
{
    for (size_t i = 0; i < ar->nentries; i++) {
        const char *path = ar->entries[i].path;
        const char *slash = strrchr(path, '/');
        if (!slash)
            continue;
        char *parent = strndup(path, (size_t)(slash - path));
        if (!parent)
            return tf_fail(e, ENOMEM, "out of memory");
        long at = search(ar, parent);
        bool ok = at >= 0 && ar->entries[at].kind == TF_ENTRY_DIR;
        free(parent);
        if (!ok)
            return tf_fail(e, EIO, "catalog: \"%s\" has no parent directory", path);
    }
    return 0;
}

/* Every live entry must have an inode number of its own: the mount finds
 * files by it (NFS handles too), and two entries with one number would
 * make one of them unreachable or a handle open the wrong file. Commits
 * never produce that (a moved entry keeps its number, its old path is a
 * tombstone); a hostile or damaged catalog may. */
static int cmp_ino_of(const void *a, const void *b)
{
    const tf_entry *x = *(const tf_entry *const *)a, *y = *(const tf_entry *const *)b;
    if (x->ino != y->ino)
        return x->ino > y->ino ? 1 : -1;
    return (x > y) - (x < y); /* path order: the message names them alike every time */
}

static int check_inodes(const tf_archive *ar, tf_error *e)
{
    const tf_entry **by_ino = malloc((ar->nentries ? ar->nentries : 1) * sizeof *by_ino);
    if (!by_ino)
        return tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < ar->nentries; i++)
        by_ino[i] = &ar->entries[i];
    qsort(by_ino, ar->nentries, sizeof *by_ino, cmp_ino_of);
    int rc = 0;
    for (size_t i = 1; rc == 0 && i < ar->nentries; i++)
        if (by_ino[i]->ino == by_ino[i - 1]->ino)
            rc = tf_fail(e, EIO, "catalog: inode number %llu is used twice, by \"%s\" and \"%s\"",
                         (unsigned long long)by_ino[i]->ino, by_ino[i - 1]->path, by_ino[i]->path);
    free(by_ino);
    return rc;
}

int archive_check_tree(const tf_archive *ar, tf_error *e)
{
    return check_parents(ar, e) < 0 ? -1 : check_inodes(ar, e);
}

int archive_scratch_after(const tf_archive *ar, const tf_segment *seg, tf_archive *scratch,
                          tf_error *e)
{
    *scratch = (tf_archive){ .nentries = ar->nentries, .entries_cap = ar->nentries,
                             .borrowed = true };
    scratch->entries = malloc((ar->nentries ? ar->nentries : 1) * sizeof *scratch->entries);
    if (!scratch->entries)
        return tf_fail(e, ENOMEM, "out of memory");
    if (ar->nentries)
        memcpy(scratch->entries, ar->entries, ar->nentries * sizeof *ar->entries);
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < seg->nentries; i++) {
        tf_entry borrowed = seg->entries[i];
        rc = archive_put_entry(scratch, &borrowed, e);
    }
    if (rc < 0)
        free(scratch->entries);
    return rc;
}

/* Whether the live entries, once seg is applied, still form a tree of
 * unique inode numbers (what an open checks of the whole catalog): seg
 * applied to a scratch index that borrows the entries, changing nothing. */
static int check_tree_after(const tf_archive *ar, const tf_segment *seg, tf_error *e)
{
    tf_archive scratch;
    if (archive_scratch_after(ar, seg, &scratch, e) < 0)
        return -1;
    int rc = archive_check_tree(&scratch, e);
    free(scratch.entries);
    return rc;
}

/* ---- open and refresh ---- */

/* Trailers link backwards: those of commits from + 1 to top_seq (whose
 * trailer is at top_off), oldest first, so that their segments can be
 * applied in order. The oldest must link to the trailer of commit
 * `from`, the last one applied (0: none). */
static int collect_trailers(const tf_container *c, uint64_t top_off, uint64_t top_seq,
                            uint64_t from, tf_commit_at **out, tf_error *e)
{
    uint64_t before;
    if (tf_container_collect_trailers(c, top_off, top_seq, from, out, &before, e) < 0)
        return -1;
    if (from && before != c->end - TF_TRAILER_SIZE) {
        free(*out);
        *out = NULL;
        return tf_fail(e, EIO, "commit %llu does not follow commit %llu: the archive was rewritten",
                       (unsigned long long)(from + 1), (unsigned long long)from);
    }
    return 0;
}

/* Catalog segments read ahead of the one being applied, on a thread of
 * their own: reading and decompressing one needs nothing of the archive
 * but its trailer, and took a third of an open of 1,001 commits that
 * the decode, the checks and the apply then waited for. The decode stays
 * with the apply: what it allocates stays (the entries), and allocated
 * on the reading thread it would take fresh pages of another malloc
 * arena, 4 KiB each (10 times the page faults of the open). */
#define READ_BATCH 8 /* commits a job reads: a hand-over between the
                        threads is a wake-up */
#define READ_AHEAD 2 /* jobs read ahead */
#define READ_SLOTS (READ_BATCH * READ_AHEAD)

typedef struct {
    tf_archive *ar;
    const tf_commit_at *commits;
    size_t n;
    bool live;
    const tf_archive_hooks *hooks;
    bool *changed;
    tf_buf raw[READ_SLOTS]; /* commit k's segment, decompressed, in
                               raw[k % READ_SLOTS] */
    size_t unread[READ_AHEAD]; /* job j's first commit not read, in
                                  unread[j % READ_AHEAD] (n: none)... */
    tf_error why[READ_AHEAD];  /* ...and why */
} replay;

/* Reads the segments of job j's commits (tf_pool_run_ordered's work). A
 * read that fails is the apply's to report, once it has applied the
 * commits before. */
static int read_segments(void *arg, size_t j, tf_error *e)
{
    (void)e;
    replay *r = arg;
    size_t end = (j + 1) * READ_BATCH < r->n ? (j + 1) * READ_BATCH : r->n;
    r->unread[j % READ_AHEAD] = r->n;
    for (size_t k = j * READ_BATCH; k < end; k++)
        if (tf_container_read_catalog(&r->ar->c, &r->commits[k].t, &r->raw[k % READ_SLOTS],
                                      &r->why[j % READ_AHEAD]) < 0) {
            r->unread[j % READ_AHEAD] = k;
            break;
        }
    return 0;
}

/* Decodes the segment of commit k, read, and applies it. A live view
 * checks it first (it must pass every check of an open before it
 * changes anything) and applies it between the hooks (when given);
 * *changed once one was. */
static int apply_segment(replay *r, size_t k, tf_error *e)
{
    tf_archive *ar = r->ar;
    const tf_trailer *t = &r->commits[k].t;
    const tf_buf *raw = &r->raw[k % READ_SLOTS];
    tf_segment seg;
    if (tf_segment_decode(raw->data, raw->len, ar->nblobs, ar->c.chunk_shift, t->catalog_off,
                          &seg, e) < 0)
        return -1;
    int rc = 0;
    if (seg.first_blob + seg.nblobs != t->nblobs)
        rc = tf_fail(e, EIO, "commit %llu: %llu blobs, trailer says %llu",
                     (unsigned long long)t->seq, (unsigned long long)(seg.first_blob + seg.nblobs),
                     (unsigned long long)t->nblobs);
    if (rc == 0 && r->live) {
        rc = tf_archive_check_segment(ar, &seg, e);
        if (rc == 0)
            rc = check_tree_after(ar, &seg, e);
    }
    if (rc < 0) {
        tf_segment_free(&seg);
        return -1;
    }
    if (r->hooks)
        r->hooks->begin(r->hooks->arg, &seg);
    rc = tf_archive_apply(ar, &seg, e);
    if (rc == 0) {
        ar->c.last = *t;
        ar->c.has_commit = true;
        ar->c.end = r->commits[k].off + TF_TRAILER_SIZE;
    }
    if (r->hooks)
        r->hooks->end(r->hooks->arg);
    if (r->live)
        *r->changed = true;
    return rc;
}

/* Applies job j's commits (tf_pool_run_ordered's sink). */
static int apply_segments(void *arg, size_t j, tf_error *e)
{
    replay *r = arg;
    size_t end = (j + 1) * READ_BATCH < r->n ? (j + 1) * READ_BATCH : r->n;
    for (size_t k = j * READ_BATCH; k < end; k++) {
        if (k == r->unread[j % READ_AHEAD]) {
            *e = r->why[j % READ_AHEAD];
            return -1;
        }
        if (apply_segment(r, k, e) < 0)
            return -1;
    }
    return 0;
}

/* Applies the n commits, in order; an open checks the tree once all are
 * applied. One thread reads ahead where there are two processors (none:
 * each segment is read, then applied). */
static int apply_commits(tf_archive *ar, const tf_commit_at *commits, uint64_t n, bool live,
                         const tf_archive_hooks *hooks, bool *changed, tf_error *e)
{
    replay r = { .ar = ar, .commits = commits, .n = n, .live = live, .hooks = hooks,
                 .changed = changed };
    size_t jobs = (n + READ_BATCH - 1) / READ_BATCH;
    tf_pool *reader = jobs > 1 && tf_online_cpus() > 1 ? tf_pool_new(1) : NULL;
    int rc = tf_pool_run_ordered(reader, jobs, READ_AHEAD, read_segments, apply_segments, &r, e);
    tf_pool_free(reader);
    for (size_t i = 0; i < READ_SLOTS; i++)
        tf_buf_free(&r.raw[i]);
    if (rc < 0 || live)
        return rc;
    return archive_check_tree(ar, e);
}

static int load_catalog(tf_archive *ar, const tf_open_opts *o, tf_error *e)
{
    bool check_all = o && o->check_all, lazy_bodies = o && o->lazy_bodies;
    if (ar->c.version == TF_FORMAT_PAGES)
        return archive_paged_open(ar, check_all, lazy_bodies, o ? o->catalog_cache : 0, e);
    ar->table = true;
    if (!ar->c.has_commit)
        return 0;
    tf_commit_at *commits = NULL;
    uint64_t top = ar->c.end - TF_TRAILER_SIZE;
    if (collect_trailers(&ar->c, top, ar->c.last.seq, 0, &commits, e) < 0)
        return -1;
    /* The blob table at the size the last trailer gives, at once: grown
     * as segments come, by doubling, it was copied and its pages touched
     * about twice (an open of 400,000 blobs spent a third of its time
     * there). Only where the archive's size bounds that room (a blob's
     * record, its 16-byte content id incompressible, takes more than 16
     * bytes of catalog), and as a hint: the segments still check the
     * count, and grow the table where this failed. */
    uint64_t nblobs = ar->c.last.nblobs;
    tf_error ignored;
    if (nblobs && nblobs <= ar->c.end / 16)
        (void)archive_resize_blobs(ar, nblobs, &ignored);
    int rc = apply_commits(ar, commits, ar->c.last.seq, false, NULL, NULL, e);
    free(commits);
    return rc;
}

int tf_archive_refresh(tf_archive *ar, const tf_archive_hooks *hooks, bool *changed, tf_error *e)
{
    *changed = false;
    if (ar->c.writable)
        return tf_fail(e, EINVAL, "the archive's writer has no other writer to follow");
    tf_trailer top;
    uint64_t at;
    bool found;
    if (tf_container_poll(&ar->c, &top, &at, &found, e) < 0)
        return -1;
    if (!found)
        return 0;
    if (ar->paged)
        return archive_paged_refresh(ar, &top, at, hooks, changed, e);
    tf_commit_at *commits = NULL;
    uint64_t from = ar->c.has_commit ? ar->c.last.seq : 0;
    if (collect_trailers(&ar->c, at, top.seq, from, &commits, e) < 0)
        return -1;
    int rc = apply_commits(ar, commits, top.seq - from, true, hooks, changed, e);
    free(commits);
    return rc;
}

/* Whether the file open as c is still the one at path. */
static int names_same_file(const tf_container *c, const char *path, bool *same, tf_error *e)
{
    struct stat named, held;
    if (stat(path, &named) < 0)
        return tf_fail(e, errno, "%s: %s", path, strerror(errno));
    if (tf_io_stat(c->io, &held, e) < 0)
        return -1;
    *same = named.st_dev == held.st_dev && named.st_ino == held.st_ino;
    return 0;
}

/* Opens the container. A writer checks, once it holds the lock, that the
 * file it locked is still the archive: `trajpack gc` replaces the file
 * under its lock, and appending to the replaced one would lose commits.
 * (An archive in object storage has no file to replace: its writer's
 * publish fails where another's came first.) */
static int open_container(tf_container *c, const char *path, const tf_open_opts *o, tf_error *e)
{
    bool writable = o && o->writable;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (tf_container_open(c, path, o, e) < 0)
            return -1;
        bool same = true;
        if (writable && !tf_io_is_remote(c->io) && names_same_file(c, path, &same, e) < 0) {
            tf_container_close(c);
            return -1;
        }
        if (same)
            return 0;
        tf_container_close(c);
    }
    return tf_fail(e, EAGAIN, "%s: replaced again and again while being opened", path);
}

int tf_archive_open(const char *path, const tf_open_opts *o, tf_archive **out, tf_error *e)
{
    tf_archive *ar = calloc(1, sizeof *ar);
    id_index *ids = calloc(1, sizeof *ids);
    if (!ar || !ids || pthread_mutex_init(&ids->lock, NULL) != 0) {
        free(ar);
        free(ids);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    ar->ids = ids;
    ar->next_ino = 2; /* 1 is the root directory */
    pthread_mutex_init(&ar->body_lock, NULL);
    if (open_container(&ar->c, path, o, e) < 0) {
        pthread_mutex_destroy(&ar->body_lock);
        pthread_mutex_destroy(&ids->lock);
        free(ids);
        free(ar);
        return -1;
    }
    if (load_catalog(ar, o, e) < 0) {
        tf_error_prefix(e, "%s", ar->c.name);
        tf_archive_close(ar);
        return -1;
    }
    *out = ar;
    return 0;
}

void tf_archive_close(tf_archive *ar)
{
    if (!ar)
        return;
    tf_container_close(&ar->c);
    tf_paged_free(ar->paged);
    for (size_t i = 0; i < ar->nentries; i++)
        tf_entry_free(&ar->entries[i]);
    free(ar->entries);
    tf_blob_table_free(&ar->blobs);
    free(ar->above);
    free(ar->flags);
    free(ar->retired);
    free(ar->written_retired);
    writer_view_free(ar->view);
    tf_id_index_free(&ar->ids->map);
    free(ar->ids->live_above);
    pthread_mutex_destroy(&ar->ids->lock);
    pthread_mutex_destroy(&ar->body_lock);
    free(ar->ids);
    free(ar);
}

unsigned tf_archive_chunk_shift(const tf_archive *ar) { return ar->c.chunk_shift; }
unsigned tf_archive_format(const tf_archive *ar) { return ar->c.version; }
uint64_t tf_archive_commits(const tf_archive *ar) { return ar->commits; }
uint64_t tf_archive_file_size(const tf_archive *ar) { return ar->c.end; }
tf_container *tf_archive_container(tf_archive *ar) { return &ar->c; }
uint64_t tf_archive_torn_bytes(const tf_archive *ar) { return ar->c.file_size - ar->c.end; }
bool tf_archive_is_remote(const tf_archive *ar) { return tf_io_is_remote(ar->c.io); }

int tf_archive_stat(const tf_archive *ar, struct stat *st, tf_error *e)
{
    return tf_io_stat(ar->c.io, st, e);
}

int tf_archive_free_space(const tf_archive *ar, uint64_t *bytes, tf_error *e)
{
    return tf_io_free_space(ar->c.io, bytes, e);
}

void tf_archive_cancel_fetches(tf_archive *ar) { tf_io_cancel(ar->c.io); }
size_t tf_archive_nentries(const tf_archive *ar) { return ar->nentries; }
const tf_entry *tf_archive_entry(const tf_archive *ar, size_t i) { return &ar->entries[i]; }
uint64_t tf_archive_nblobs(const tf_archive *ar) { return ar->nblobs; }
int tf_archive_blob(const tf_archive *ar, uint64_t idx, tf_blob *b, tf_error *e)
{
    if (idx >= ar->nblobs)
        return tf_fail(e, EIO, "blob %llu: not in the catalog (%llu blobs)", (unsigned long long)idx,
                       (unsigned long long)ar->nblobs);
    if (!ar->table)
        return archive_paged_blob(ar, idx, b, e);
    *b = tf_blob_table_get(&ar->blobs, idx);
    return 0;
}

unsigned tf_archive_chain_depth(const tf_archive *ar, uint64_t idx)
{
    if (ar->table) /* applied chains are within TF_CHAIN_MAX */
        return (unsigned)chain_depth(ar, NULL, NULL, idx);
    unsigned depth = 0;
    tf_blob b;
    tf_error ignored; /* a read reports it */
    for (; depth <= TF_CHAIN_MAX && tf_archive_blob(ar, idx, &b, &ignored) == 0; idx = b.ref - 1)
        if (!b.ref)
            return depth;
        else
            depth++;
    return TF_CHAIN_MAX + 1;
}

unsigned tf_archive_chain_above(const tf_archive *ar, uint64_t idx)
{
    if (!ar->table && ar->view)
        return writer_view_above(ar, idx);
    /* Out of memory to count: every delta's count, larger, never
     * smaller. */
    if (!atomic_load_explicit(&ar->ids->built, memory_order_acquire) && !build_ids(ar))
        return ar->above ? ar->above[idx] : TF_CHAIN_MAX;
    return ar->ids->live_above[idx];
}

bool tf_archive_may_redirect(const tf_archive *ar, uint64_t idx, bool *again)
{
    if (!ar->table && !ar->view) /* a reader's paged view: no writer asks it */
        return *again = false;
    uint8_t flags;
    stored_slot(ar, idx, &flags);
    *again = flags & SLOT_REDIRECTED;
    return !(flags & (SLOT_MODEL | SLOT_TARGET));
}

bool tf_archive_blob_serves_slot(const tf_archive *ar, uint64_t idx)
{
    return ar->table && (ar->flags[idx] & SLOT_TARGET);
}

uint64_t tf_archive_retired_bytes(const tf_archive *ar) { return ar->retired_bytes; }


bool tf_blob_in_retirable_run(const tf_blob *b)
{
    return !b->ref && b->dtype != TF_DT_NONE && b->enc_len >= TF_GIVE_BACK_MIN;
}

const tf_archive_range *tf_archive_retired(const tf_archive *ar, size_t *n)
{
    *n = ar->nretired;
    return ar->retired;
}
uint64_t tf_archive_next_ino(const tf_archive *ar) { return ar->next_ino; }

long tf_archive_find(const tf_archive *ar, const char *path)
{
    long at = search(ar, path);
    return at >= 0 ? at : -1;
}

const tf_entry *tf_archive_lookup(const tf_archive *ar, const char *path)
{
    long at = tf_archive_find(ar, path);
    return at >= 0 ? &ar->entries[at] : NULL;
}
