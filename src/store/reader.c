/* The reader: its cache, and blobs reconstructed into it or copied out
 * of it. */
#include "store/reader.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpus.h"
#include "store/blob_io.h"
#include "store/reader_impl.h"

/* A chain decode holds two blobs at once; keep room for two chunks of
 * the widest dtype (8-byte elements) so that a step of a chain never
 * evicts the blob it is about to use. */
static size_t cache_bound(const tf_archive *ar, size_t cache_bytes)
{
    size_t floor = (size_t)16 << tf_archive_chunk_shift(ar);
    return cache_bytes > floor ? cache_bytes : floor;
}

tf_reader_ctx *tf_reader_new(tf_archive *ar, size_t cache_bytes)
{
    tf_reader_ctx *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ar = ar;
    r->cache = tf_cache_new(cache_bound(ar, cache_bytes));
    r->steps_seen = calloc((size_t)1 << TF_STEPS_SEEN_BITS, sizeof *r->steps_seen);
    if (!r->cache || !r->steps_seen) {
        tf_cache_free(r->cache);
        free(r->steps_seen);
        free(r);
        return NULL;
    }
    /* one decode per CPU at once: more gain nothing */
    unsigned cpus = tf_online_cpus();
    tf_spare_bufs_init(&r->payloads, cpus);
    tf_spare_bufs_init(&r->steps, 2 * (size_t)cpus);
    tf_slots_init(&r->decodes, cpus);
    return r;
}

void tf_reader_set_cache_bound(tf_reader_ctx *r, size_t cache_bytes)
{
    tf_cache_set_bound(r->cache, cache_bound(r->ar, cache_bytes));
}

size_t tf_reader_cache_bound(const tf_reader_ctx *r)
{
    return tf_cache_bound(r->cache);
}

void tf_reader_free(tf_reader_ctx *r)
{
    if (!r)
        return;
    tf_cache_free(r->cache);
    free(r->steps_seen);
    tf_spare_bufs_destroy(&r->payloads);
    tf_spare_bufs_destroy(&r->steps);
    tf_slots_destroy(&r->decodes);
    free(r);
}

tf_archive *tf_reader_archive(const tf_reader_ctx *r)
{
    return r->ar;
}

tf_reader_counts tf_reader_get_counts(const tf_reader_ctx *r)
{
    return (tf_reader_counts){ .decoded = r->decoded, .decoded_bytes = r->decoded_bytes,
                               .hits = r->hits };
}

tf_cache_item *tf_reader_obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e)
{
    bool claimed;
    tf_cache_item *it = tf_cache_acquire(r->cache, idx, &claimed);
    if (!it) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (!claimed) {
        r->hits++;
        return it;
    }
    tf_blob b;
    int rc = tf_archive_blob(r->ar, idx, &b, e);
    if (rc == 0) {
        uint8_t *data = tf_cache_buffer(r->cache, it, (size_t)b.raw_len);
        rc = data ? tf_reader_decode_chain(r, idx, data, e) : tf_fail(e, ENOMEM, "out of memory");
    }
    if (rc < 0) {
        tf_cache_abandon(r->cache, it);
        return NULL;
    }
    tf_cache_fill(r->cache, it);
    return it;
}

void tf_reader_warm(tf_reader_ctx *r, uint64_t idx)
{
    /* One being decoded (by a read, most often) is not waited for: the
     * prefetcher goes on to the next blob. */
    if (tf_cache_has(r->cache, idx))
        return;
    tf_error e;
    tf_cache_item *it = tf_reader_obtain(r, idx, &e);
    if (it)
        tf_cache_release(r->cache, it);
}

void tf_reader_will_need(tf_reader_ctx *r, const uint64_t *idx, size_t n)
{
    tf_blob_hints h = { .n = 0 };
    tf_error ignored; /* hints: the reads report what fails */
    for (size_t k = 0; k < n; k++) {
        tf_blob b, model;
        for (uint64_t i = idx[k]; !tf_cache_has(r->cache, i) &&
                                  tf_archive_blob(r->ar, i, &b, &ignored) == 0;
             i = b.ref - 1) {
            if (b.model && !tf_cache_has(r->cache, b.model - 1) &&
                tf_archive_blob(r->ar, b.model - 1, &model, &ignored) == 0)
                tf_blob_hints_add(r->ar, &h, &model);
            tf_blob_hints_add(r->ar, &h, &b);
            if (!b.ref)
                break;
        }
    }
    tf_blob_hints_send(r->ar, &h);
}

int tf_reader_blob_once(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    tf_cache_item *it = tf_cache_peek(r->cache, idx);
    if (!it)
        return tf_reader_decode_chain(r, idx, out, e);
    r->hits++;
    memcpy(out, it->data, it->len);
    tf_cache_release(r->cache, it);
    return 0;
}

void tf_reader_seed_owned(tf_reader_ctx *r, uint64_t idx, uint8_t *data)
{
    tf_blob b;
    tf_error ignored; /* a seed: without it, the blob is decoded when read */
    if (tf_archive_blob(r->ar, idx, &b, &ignored) < 0) {
        free(data);
        return;
    }
    bool claimed;
    tf_cache_item *it = tf_cache_acquire(r->cache, idx, &claimed);
    if (it && claimed) {
        tf_cache_adopt(r->cache, it, data, (size_t)b.raw_len);
        tf_cache_fill(r->cache, it);
        data = NULL;
    }
    if (it)
        tf_cache_release(r->cache, it);
    free(data);
}

int tf_reader_blob(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    tf_cache_item *it = tf_reader_obtain(r, idx, e);
    if (!it)
        return -1;
    memcpy(out, it->data, it->len);
    tf_cache_release(r->cache, it);
    return 0;
}
