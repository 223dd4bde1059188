/* Reconstructing a blob: walking its reference chain down to a cached or
 * self-contained blob, then decoding the chain upwards. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "store/blob_io.h"
#include "store/reader_impl.h"

/* Reads and checks a blob's payload into a payload buffer (each decode
 * has its own, so threads decode side by side). */
static tf_buf *read_payload(tf_reader_ctx *r, uint64_t idx, const tf_blob *b, tf_error *e)
{
    tf_buf *buf = tf_spare_buf_take(&r->payloads);
    int rc = buf ? tf_blob_read_payload(r->ar, b, buf, e) : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_error_prefix(e, "blob %llu", (unsigned long long)idx);
        tf_spare_buf_give(&r->payloads, buf);
        return NULL;
    }
    return buf;
}

/* Decodes blob idx, whose record is b, given its reference's bytes (NULL
 * when it has none) and its model (NULL when it has none), and, with
 * check_id, checks the result against the blob's id. */
static int decode_one(tf_reader_ctx *r, uint64_t idx, const tf_blob *b, const uint8_t *ref,
                      const tf_cache_item *model, uint8_t *out, bool check_id, tf_error *e)
{
    tf_codec_ctx ctx = { .dtype = b->dtype, .ref = ref, .ref_len = ref ? b->raw_len : 0 };
    if (model) {
        ctx.model = model->data;
        ctx.model_len = model->len;
    }
    tf_buf *payload = read_payload(r, idx, b, e);
    if (!payload)
        return -1;
    const tf_codec *codec = tf_codec_get(b->codec);
    int rc = codec->decode(payload->data, b->enc_len, &ctx, out, b->raw_len, e);
    tf_spare_buf_give(&r->payloads, payload);
    if (rc < 0) {
        tf_error_prefix(e, "blob %llu (%s)", (unsigned long long)idx, codec->name);
        return -1;
    }
    r->decoded++;
    r->decoded_bytes += b->raw_len;
    if (!check_id)
        return 0;
    tf_blob_id id = tf_blob_id_of(out, b->raw_len);
    if (!tf_blob_id_eq(&id, &b->id))
        return tf_fail(e, EIO, "blob %llu (%s): decoded bytes do not match their id",
                       (unsigned long long)idx, codec->name);
    return 0;
}

/* Asks for the payloads (and models) of the n blobs of a chain, all at
 * once: the decode then finds them read, or being read, instead of
 * waiting for one read per step. */
static void will_need(tf_reader_ctx *r, const tf_blob *blobs, size_t n)
{
    tf_blob_hints h = { .n = 0 };
    for (size_t i = n; i-- > 0;) {
        tf_blob model;
        tf_error ignored; /* a hint: the decode reports what fails */
        if (blobs[i].model && tf_archive_blob(r->ar, blobs[i].model - 1, &model, &ignored) == 0)
            tf_blob_hints_add(r->ar, &h, &model);
        tf_blob_hints_add(r->ar, &h, &blobs[i]);
    }
    tf_blob_hints_send(r->ar, &h);
}

/* Whether blob idx was lately a step of a chain decoded and not kept;
 * notes it as one from now on. */
static bool step_seen_before(tf_reader_ctx *r, uint64_t idx)
{
    /* Fibonacci hashing spreads consecutive indices over the slots. */
    size_t slot = (size_t)((idx * 0x9e3779b97f4a7c15u) >> (64 - TF_STEPS_SEEN_BITS));
    return atomic_exchange_explicit(&r->steps_seen[slot], idx + 1, memory_order_relaxed) ==
           idx + 1;
}

/* A chain to decode: chain[0] the blob wanted, chain[i + 1] the
 * reference of chain[i], down to chain[n - 1], which is self-contained
 * or has `base`, a cached blob, for reference; blobs[i] the record of
 * chain[i]; models[i] the model of chain[i], held (or NULL); kept[i]
 * (i >= 1) the cache item claimed for step chain[i], or NULL for a step
 * decoded into a buffer of its own. Room for cap steps. */
typedef struct {
    uint64_t *chain;
    tf_blob *blobs;
    tf_cache_item **models, **kept;
    size_t n, cap;
    tf_cache_item *base;
} chain_walk;

/* Room for this step and the next one's cache item (a walk that grows
 * past TF_CHAIN_MAX fails before). */
static int walk_grow(chain_walk *w, tf_error *e)
{
    if (w->n + 1 < w->cap)
        return 0;
    size_t cap = w->cap ? 2 * w->cap : 8;
    uint64_t *chain = realloc(w->chain, cap * sizeof *chain);
    if (chain)
        w->chain = chain;
    tf_blob *blobs = realloc(w->blobs, cap * sizeof *blobs);
    if (blobs)
        w->blobs = blobs;
    tf_cache_item **models = realloc(w->models, 2 * cap * sizeof *models);
    if (models) {
        /* kept follows models: move it to its new place, zero the rest */
        memmove(models + cap, models + w->cap, w->cap * sizeof *models);
        memset(models + w->cap, 0, (cap - w->cap) * sizeof *models);
        memset(models + cap + w->cap, 0, (cap - w->cap) * sizeof *models);
        w->models = models;
        w->kept = models + cap;
    }
    if (!chain || !blobs || !models)
        return tf_fail(e, ENOMEM, "out of memory");
    w->cap = cap;
    return 0;
}

/* Drops what the walk holds: the steps kept from `filled_from` on were
 * filled; the others, claimed still, are abandoned. */
static void walk_release(tf_reader_ctx *r, chain_walk *w, size_t filled_from)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->models[i])
            tf_cache_release(r->cache, w->models[i]);
        if (i && w->kept[i])
            (i < filled_from ? tf_cache_abandon : tf_cache_release)(r->cache, w->kept[i]);
    }
    if (w->base)
        tf_cache_release(r->cache, w->base);
    free(w->chain);
    free(w->blobs);
    free(w->models);
}

/* Obtains the model of b, the last step of w: a self-contained blob
 * (an open of format version 1 checks that of every blob; one of
 * version 2, each as it is read), decoded apart. */
static int obtain_model(tf_reader_ctx *r, chain_walk *w, const tf_blob *b, tf_error *e)
{
    tf_blob model;
    if (tf_archive_blob(r->ar, b->model - 1, &model, e) < 0)
        return -1;
    if (model.ref || model.model)
        return tf_fail(e, EIO, "blob %llu: model blob %llu is not self-contained",
                       (unsigned long long)w->chain[w->n - 1], (unsigned long long)(b->model - 1));
    w->models[w->n - 1] = tf_reader_obtain(r, b->model - 1, e);
    return w->models[w->n - 1] ? 0 : -1;
}

/* A delta's reference reconstructs as many bytes of the same dtype:
 * checked at an open of format version 1, at the read of version 2. */
static int check_reference(uint64_t idx, const tf_blob *b, uint64_t ref, const tf_blob *rb,
                           tf_error *e)
{
    if (rb->raw_len != b->raw_len || rb->dtype != b->dtype)
        return tf_fail(e, EIO, "blob %llu: reference blob %llu differs in size or dtype",
                       (unsigned long long)idx, (unsigned long long)ref);
    return 0;
}

/* Walks down from blob idx to a cached blob (waiting for one being
 * decoded) or a self-contained one, and obtains the models on the way:
 * everything a decode could wait for, so that a thread holding a slot
 * never waits for another's work (which could be waiting for a slot).
 *
 * A step between is kept in the cache when it was a step of a chain
 * decoded lately: a reverse chain read oldest checkpoint first (cp -r,
 * rsync) then decodes each blob about twice instead of once per older
 * checkpoint, while a cold load of one checkpoint keeps none (fresh
 * cache blocks for its steps made it 1.4 times as slow). The walk claims
 * a step it keeps; it waits only for a blob further down the chains than
 * every blob it claimed (a blob has one reference), so no two threads
 * wait for each other. */
static int walk_chain(tf_reader_ctx *r, uint64_t idx, chain_walk *w, tf_error *e)
{
    *w = (chain_walk){ .n = 0 };
    tf_blob next; /* the record of step i, read by the step before (the first: none) */
    bool have_next = false;
    for (uint64_t i = idx;;) {
        if (w->n > TF_CHAIN_MAX)
            return tf_fail(e, EIO, "blob %llu: reference chain longer than %d",
                           (unsigned long long)idx, TF_CHAIN_MAX);
        if (walk_grow(w, e) < 0)
            return -1;
        if (have_next)
            w->blobs[w->n] = next;
        else if (tf_archive_blob(r->ar, i, &w->blobs[w->n], e) < 0)
            return -1;
        const tf_blob *b = &w->blobs[w->n];
        w->chain[w->n++] = i;
        if (b->model && obtain_model(r, w, b, e) < 0)
            return -1;
        if (!b->ref)
            return 0;
        uint64_t ref = b->ref - 1;
        if (tf_archive_blob(r->ar, ref, &next, e) < 0 || check_reference(i, b, ref, &next, e) < 0)
            return -1;
        have_next = true;
        w->base = tf_cache_get(r->cache, ref);
        if (!w->base && step_seen_before(r, ref)) {
            bool claimed;
            tf_cache_item *it = tf_cache_acquire(r->cache, ref, &claimed);
            if (!it)
                return tf_fail(e, ENOMEM, "out of memory");
            if (claimed)
                w->kept[w->n] = it;
            else
                w->base = it; /* filled by another thread meanwhile */
        }
        if (w->base) {
            r->hits++;
            return 0;
        }
        i = ref;
    }
}

/* Decodes a walked chain upwards into out. A step kept goes into its
 * cache item, checked against its id and published at once; the others
 * go through two reused buffers (fresh cache blocks for them took a
 * sixth of the CPU time of a cold load), unchecked: a step decoded wrong
 * is the reference of the next, so the result differs from its id too
 * (and the stored bytes of every step are checked by their checksums).
 * Returns 0, or -1 with *filled_from the first kept step filled. */
static int decode_walk(tf_reader_ctx *r, const chain_walk *w, uint8_t *out, size_t *filled_from,
                       tf_error *e)
{
    tf_buf *bufs[2] = { NULL, NULL };
    const uint8_t *ref = w->base ? w->base->data : NULL;
    int rc = 0;
    for (size_t i = w->n; rc == 0 && i-- > 1;) {
        size_t len = (size_t)w->blobs[i].raw_len;
        tf_cache_item *it = w->kept[i];
        uint8_t *step;
        if (it) {
            step = tf_cache_buffer(r->cache, it, len);
        } else {
            tf_buf **buf = &bufs[i & 1]; /* not the one holding ref */
            if (!*buf)
                *buf = tf_spare_buf_take(&r->steps);
            step = *buf ? ((*buf)->len = 0, tf_buf_reserve(*buf, len)) : NULL;
        }
        rc = step ? decode_one(r, w->chain[i], &w->blobs[i], ref, w->models[i], step, it != NULL, e)
                  : tf_fail(e, ENOMEM, "out of memory for a chain step");
        if (rc == 0 && it) {
            tf_cache_fill(r->cache, it);
            *filled_from = i;
        }
        ref = step;
    }
    if (rc == 0)
        rc = decode_one(r, w->chain[0], &w->blobs[0], ref, w->models[0], out, true, e);
    tf_spare_buf_give(&r->steps, bufs[0]);
    tf_spare_buf_give(&r->steps, bufs[1]);
    return rc;
}

/* A blob this small, decoded alone (a model), takes no decode slot: the
 * slots bound the chains decoded at once, and a walk that had to wait
 * for one behind two chains for each model on its way (a model a step)
 * left a CPU idle when they ended. */
#define SLOTLESS_MAX ((uint64_t)64 << 10)

int tf_reader_decode_chain(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    chain_walk w;
    int rc = walk_chain(r, idx, &w, e);
    size_t filled_from = w.n;
    if (rc == 0) {
        will_need(r, w.blobs, w.n);
        bool slot = w.n > 1 || w.base || w.blobs[0].raw_len > SLOTLESS_MAX;
        if (slot)
            tf_slot_take(&r->decodes);
        rc = decode_walk(r, &w, out, &filled_from, e);
        if (slot)
            tf_slot_give(&r->decodes);
    }
    walk_release(r, &w, filled_from);
    return rc;
}
