/* Reconstructing a blob: walking its reference chain down to a cached or
 * self-contained blob, then decoding the chain upwards. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "codec/codec.h"
#include "store/blob_io.h"
#include "store/reader_impl.h"

/* Reads and checks a blob's payload into a payload buffer (each decode
 * has its own, so threads decode side by side). */
static tf_buf *read_payload(tf_reader_ctx *r, uint64_t idx, tf_error *e)
{
    tf_buf *buf = tf_spare_buf_take(&r->payloads);
    int rc = buf ? tf_blob_read_payload(r->ar, tf_archive_blob(r->ar, idx), buf, e)
                 : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_error_prefix(e, "blob %llu", (unsigned long long)idx);
        tf_spare_buf_give(&r->payloads, buf);
        return NULL;
    }
    return buf;
}

/* Decodes one blob given its reference's bytes (NULL when it has none)
 * and its model (NULL when it has none), and, with check_id, checks the
 * result against the blob's id. */
static int decode_one(tf_reader_ctx *r, uint64_t idx, const uint8_t *ref,
                      const tf_cache_item *model, uint8_t *out, bool check_id, tf_error *e)
{
    const tf_blob *b = tf_archive_blob(r->ar, idx);
    tf_codec_ctx ctx = { .dtype = b->dtype, .ref = ref, .ref_len = ref ? b->raw_len : 0 };
    if (model) {
        ctx.model = model->data;
        ctx.model_len = model->len;
    }
    tf_buf *payload = read_payload(r, idx, e);
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
static void will_need(tf_reader_ctx *r, const uint64_t *chain, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        const tf_blob *b = tf_archive_blob(r->ar, chain[i]);
        if (b->model)
            tf_blob_will_need(r->ar, tf_archive_blob(r->ar, b->model - 1));
        tf_blob_will_need(r->ar, b);
    }
}

/* A chain to decode: chain[0] the blob wanted, chain[i + 1] the
 * reference of chain[i], down to chain[n - 1], which is self-contained
 * or has `base`, a cached blob, for reference; models[i] the model of
 * chain[i], held (or NULL). */
typedef struct {
    uint64_t *chain;
    tf_cache_item **models;
    size_t n;
    tf_cache_item *base;
} chain_walk;

static void walk_release(tf_reader_ctx *r, chain_walk *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->models[i])
            tf_cache_release(r->cache, w->models[i]);
    if (w->base)
        tf_cache_release(r->cache, w->base);
    free(w->chain);
}

/* Walks down from blob idx to a cached blob (waiting for one being
 * decoded) or a self-contained one, and obtains the models on the way:
 * everything a decode could wait for, so that a thread holding a slot
 * never waits for another's work (which could be waiting for a slot). */
static int walk_chain(tf_reader_ctx *r, uint64_t idx, chain_walk *w, tf_error *e)
{
    size_t depth = (size_t)tf_archive_chain_depth(r->ar, idx) + 1;
    *w = (chain_walk){ .chain = malloc(depth * (sizeof *w->chain + sizeof *w->models)) };
    if (!w->chain)
        return tf_fail(e, ENOMEM, "out of memory");
    w->models = (tf_cache_item **)(w->chain + depth);
    for (uint64_t i = idx;;) {
        const tf_blob *b = tf_archive_blob(r->ar, i);
        if (w->n == depth) /* the chain changed under us: never the case */
            return tf_fail(e, EIO, "blob %llu: reference chain changed while read",
                           (unsigned long long)idx);
        w->chain[w->n] = i;
        w->models[w->n++] = NULL;
        if (b->model) {
            /* Models are self-contained earlier blobs: one level deep, and
             * a wait for one is a wait on a smaller key (see
             * tf_cache_acquire). */
            w->models[w->n - 1] = tf_reader_obtain(r, b->model - 1, e);
            if (!w->models[w->n - 1])
                return -1;
        }
        if (!b->ref)
            return 0;
        w->base = tf_cache_get(r->cache, b->ref - 1);
        if (w->base) {
            r->hits++;
            return 0;
        }
        i = b->ref - 1;
    }
}

/* Decodes a walked chain upwards into out: the steps between go through
 * two reused buffers, not the cache. No read asked for them, and in a
 * cold load of one checkpoint, where every step is a miss, faulting in
 * fresh cache blocks for them took a sixth of the CPU time. Only the
 * result has its id checked: a step decoded wrong is the reference of
 * the next, so the result differs from its id too (and the stored bytes
 * of every step are checked by their checksums). */
static int decode_walk(tf_reader_ctx *r, const chain_walk *w, uint8_t *out, tf_error *e)
{
    tf_buf *bufs[2] = { NULL, NULL };
    const uint8_t *ref = w->base ? w->base->data : NULL;
    int rc = 0;
    for (size_t i = w->n; rc == 0 && i-- > 1;) {
        tf_buf **buf = &bufs[i & 1]; /* not the one holding ref */
        if (!*buf)
            *buf = tf_spare_buf_take(&r->steps);
        size_t len = (size_t)tf_archive_blob(r->ar, w->chain[i])->raw_len;
        uint8_t *step = *buf ? ((*buf)->len = 0, tf_buf_reserve(*buf, len)) : NULL;
        rc = step ? decode_one(r, w->chain[i], ref, w->models[i], step, false, e)
                  : tf_fail(e, ENOMEM, "out of memory for a chain step");
        ref = step;
    }
    if (rc == 0)
        rc = decode_one(r, w->chain[0], ref, w->models[0], out, true, e);
    tf_spare_buf_give(&r->steps, bufs[0]);
    tf_spare_buf_give(&r->steps, bufs[1]);
    return rc;
}

int tf_reader_decode_chain(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    chain_walk w;
    int rc = walk_chain(r, idx, &w, e);
    if (rc == 0) {
        will_need(r, w.chain, w.n);
        tf_slot_take(&r->decodes);
        rc = decode_walk(r, &w, out, e);
        tf_slot_give(&r->decodes);
    }
    walk_release(r, &w);
    return rc;
}
