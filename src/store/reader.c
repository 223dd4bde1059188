#include "store/reader.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/cpus.h"
#include "format/dtype.h"
#include "format/safetensors.h"
#include "store/blob_io.h"
#include "store/cache.h"

#define PAYLOADS_KEPT_MAX 64

struct tf_reader_ctx {
    tf_archive *ar;
    tf_cache *cache;
    /* Buffers for encoded bytes, kept between decodes: reading into one
     * that is already mapped costs no allocation and no page faults (a
     * fresh multi-MiB buffer is mapped and zeroed page by page). At most
     * payloads_keep are kept, so the memory held stays bounded whatever
     * the number of threads; more decodes at once use buffers of their
     * own. */
    pthread_mutex_t payloads_lock;
    tf_buf *payloads[PAYLOADS_KEPT_MAX];
    size_t npayloads, payloads_keep;
    _Atomic uint64_t decoded, hits;
    /* Parsed header of the last entry asked for tensor names, by inode
     * (unique, unlike an entry's address across catalog updates). */
    uint64_t names_of;
    tf_st_header names;
};

/* One kept payload buffer per CPU: more decodes at once gain nothing. */
static size_t payloads_to_keep(void)
{
    unsigned cpus = tf_online_cpus();
    return cpus > PAYLOADS_KEPT_MAX ? PAYLOADS_KEPT_MAX : cpus;
}

tf_reader_ctx *tf_reader_new(tf_archive *ar, size_t cache_bytes)
{
    /* A chain decode holds two blobs at once; keep room for two chunks of
     * the widest dtype (8-byte elements) so that a step of a chain never
     * evicts the blob it is about to use. */
    size_t floor = (size_t)16 << tf_archive_chunk_shift(ar);
    tf_reader_ctx *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ar = ar;
    r->cache = tf_cache_new(cache_bytes > floor ? cache_bytes : floor);
    if (!r->cache) {
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->payloads_lock, NULL);
    r->payloads_keep = payloads_to_keep();
    return r;
}

static void destroy_payload(tf_buf *b)
{
    tf_buf_free(b);
    free(b);
}

void tf_reader_free(tf_reader_ctx *r)
{
    if (!r)
        return;
    tf_cache_free(r->cache);
    while (r->npayloads)
        destroy_payload(r->payloads[--r->npayloads]);
    pthread_mutex_destroy(&r->payloads_lock);
    if (r->names_of)
        tf_st_free(&r->names);
    free(r);
}

tf_reader_counts tf_reader_get_counts(const tf_reader_ctx *r)
{
    return (tf_reader_counts){ .decoded = r->decoded, .hits = r->hits };
}

static tf_cache_item *obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e);

/* An empty payload buffer, a kept one when there is; NULL when out of
 * memory. */
static tf_buf *take_payload(tf_reader_ctx *r)
{
    pthread_mutex_lock(&r->payloads_lock);
    tf_buf *b = r->npayloads ? r->payloads[--r->npayloads] : NULL;
    pthread_mutex_unlock(&r->payloads_lock);
    return b ? b : calloc(1, sizeof *b);
}

static void give_payload(tf_reader_ctx *r, tf_buf *b)
{
    b->len = 0;
    pthread_mutex_lock(&r->payloads_lock);
    if (r->npayloads < r->payloads_keep) {
        r->payloads[r->npayloads++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&r->payloads_lock);
    if (b)
        destroy_payload(b);
}

/* Reads and checks a blob's payload into a payload buffer (each decode
 * has its own, so threads decode side by side). */
static tf_buf *read_payload(tf_reader_ctx *r, uint64_t idx, tf_error *e)
{
    tf_buf *buf = take_payload(r);
    int rc = buf ? tf_blob_read_payload(r->ar, tf_archive_blob(r->ar, idx), buf, e)
                 : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_error_prefix(e, "blob %llu", (unsigned long long)idx);
        if (buf)
            give_payload(r, buf);
        return NULL;
    }
    return buf;
}

/* Decodes one blob given its reference's bytes (NULL when it has none). */
static int decode_one(tf_reader_ctx *r, uint64_t idx, const uint8_t *ref, uint8_t *out, tf_error *e)
{
    const tf_blob *b = tf_archive_blob(r->ar, idx);
    tf_codec_ctx ctx = { .dtype = b->dtype, .ref = ref, .ref_len = ref ? b->raw_len : 0 };
    tf_cache_item *model = NULL;
    if (b->model) {
        /* Models are self-contained earlier blobs: one level deep, and a
         * wait for one is a wait on a smaller key (see tf_cache_acquire). */
        model = obtain(r, b->model - 1, e);
        if (!model)
            return -1;
        ctx.model = model->data;
        ctx.model_len = model->len;
    }
    tf_buf *payload = read_payload(r, idx, e);
    const tf_codec *codec = tf_codec_get(b->codec);
    int rc = -1;
    if (payload) {
        rc = codec->decode(payload->data, b->enc_len, &ctx, out, b->raw_len, e);
        give_payload(r, payload);
        if (rc < 0)
            tf_error_prefix(e, "blob %llu (%s)", (unsigned long long)idx, codec->name);
    }
    if (model)
        tf_cache_release(r->cache, model);
    if (rc < 0)
        return -1;
    r->decoded++;
    tf_blob_id id = tf_blob_id_of(out, b->raw_len);
    if (!tf_blob_id_eq(&id, &b->id))
        return tf_fail(e, EIO, "blob %llu (%s): decoded bytes do not match their id",
                       (unsigned long long)idx, codec->name);
    return 0;
}

/* Decodes the claimed blob `it` against its reference (NULL when it has
 * none) and fills it, or abandons it on failure. */
static int fill_claim(tf_reader_ctx *r, tf_cache_item *it, const tf_cache_item *ref, tf_error *e)
{
    const tf_blob *b = tf_archive_blob(r->ar, it->key);
    uint8_t *data = tf_cache_buffer(r->cache, it, b->raw_len);
    int rc = data ? decode_one(r, it->key, ref ? ref->data : NULL, data, e)
                  : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_cache_abandon(r->cache, it);
        return -1;
    }
    tf_cache_fill(r->cache, it);
    return 0;
}

/* Returns blob idx reconstructed, held in the cache. Claims the blobs of
 * the reference chain downwards until a cached (or being decoded) or a
 * self-contained one, then decodes upwards: memory stays at two blobs
 * whatever the chain length, and no blob is decoded twice at once. */
static tf_cache_item *obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e)
{
    bool claimed;
    tf_cache_item *ready = tf_cache_acquire(r->cache, idx, &claimed);
    if (!ready) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (!claimed) {
        r->hits++;
        return ready;
    }
    tf_cache_item **chain = malloc(((size_t)tf_archive_chain_depth(r->ar, idx) + 1) * sizeof *chain);
    if (!chain) {
        tf_cache_abandon(r->cache, ready);
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    size_t n = 0;
    chain[n++] = ready;
    ready = NULL;
    int rc = 0;
    for (const tf_blob *b = tf_archive_blob(r->ar, idx); b->ref; b = tf_archive_blob(r->ar, b->ref - 1)) {
        tf_cache_item *it = tf_cache_acquire(r->cache, b->ref - 1, &claimed);
        if (!it) {
            rc = tf_fail(e, ENOMEM, "out of memory");
            break;
        }
        if (!claimed) {
            r->hits++;
            ready = it;
            break;
        }
        chain[n++] = it;
    }
    while (n-- > 0) {
        if (rc == 0)
            rc = fill_claim(r, chain[n], ready, e);
        else
            tf_cache_abandon(r->cache, chain[n]);
        if (ready)
            tf_cache_release(r->cache, ready);
        ready = rc == 0 ? chain[n] : NULL;
    }
    free(chain);
    return ready;
}

int tf_reader_blob(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    tf_cache_item *it = obtain(r, idx, e);
    if (!it)
        return -1;
    memcpy(out, it->data, it->len);
    tf_cache_release(r->cache, it);
    return 0;
}

/* Copies [off, off+len) of a run of chunk blobs covering span_len bytes
 * with chunk_bytes per chunk into out. */
static int read_chunks(tf_reader_ctx *r, const uint64_t *chunks, uint64_t chunk_bytes,
                       uint64_t off, size_t len, uint8_t *out, tf_error *e)
{
    while (len) {
        uint64_t c = off / chunk_bytes, in = off % chunk_bytes;
        tf_cache_item *it = obtain(r, chunks[c], e);
        if (!it)
            return -1;
        size_t n = it->len - in < len ? (size_t)(it->len - in) : len;
        memcpy(out, it->data + in, n);
        tf_cache_release(r->cache, it);
        out += n;
        off += n;
        len -= n;
    }
    return 0;
}

/* Index of the tensor whose data holds byte `off` of the data section. */
static uint64_t tensor_at(const tf_entry *ent, uint64_t off)
{
    uint64_t lo = 0, hi = ent->ntensors;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ent->tensors[mid].data_off <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Prefixes e with the file and the name of its tensor t. The header is
 * parsed afresh: this is the error path, and it keeps reads free of
 * shared state. */
static void prefix_tensor_name(const tf_entry *ent, uint64_t t, tf_error *e)
{
    tf_st_header h;
    bool parsed = tf_st_parse(ent->header, ent->header_len, ent->size, ent->path, &h, NULL) == 0;
    tf_error_prefix(e, "%s: tensor \"%s\"", ent->path,
                    parsed && t < h.ntensors ? h.tensors[t].name : "?");
    tf_st_free(&h); /* left empty when parsing failed */
}

static int read_safetensors(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                            uint8_t *out, tf_error *e)
{
    uint8_t prefix[8];
    tf_le64_put(prefix, ent->header_len);
    const struct { const uint8_t *p; uint64_t start, end; } head[2] = {
        { prefix, 0, 8 },
        { ent->header, 8, 8 + ent->header_len },
    };
    for (int h = 0; h < 2; h++) {
        if (!len || off >= head[h].end)
            continue;
        size_t n = head[h].end - off < len ? (size_t)(head[h].end - off) : len;
        memcpy(out, head[h].p + (off - head[h].start), n);
        out += n;
        off += n;
        len -= n;
    }
    uint64_t data_start = 8 + ent->header_len;
    uint64_t t = len ? tensor_at(ent, off - data_start) : 0;
    for (; len; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        uint64_t in = off - data_start - ts->data_off;
        if (in >= ts->nbytes)
            continue; /* empty tensors */
        size_t n = ts->nbytes - in < len ? (size_t)(ts->nbytes - in) : len;
        uint64_t chunk_bytes = (uint64_t)tf_dtype_get(ts->dtype)->size << tf_archive_chunk_shift(r->ar);
        if (read_chunks(r, ent->chunks + ts->first_chunk, chunk_bytes, in, n, out, e) < 0) {
            prefix_tensor_name(ent, t, e);
            return -1;
        }
        out += n;
        off += n;
        len -= n;
    }
    return 0;
}

ssize_t tf_reader_pread(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                        uint8_t *out, tf_error *e)
{
    if (!tf_entry_is_regular(ent))
        return tf_fail(e, EISDIR, "%s: not a regular file", ent->path);
    if (off >= ent->size)
        return 0;
    if (len > ent->size - off)
        len = (size_t)(ent->size - off);
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    int rc;
    if (ent->kind == TF_ENTRY_FILE) {
        rc = read_chunks(r, ent->chunks, (uint64_t)1 << tf_archive_chunk_shift(r->ar), off, len, out, e);
        if (rc < 0)
            tf_error_prefix(e, "%s", ent->path);
    } else {
        rc = read_safetensors(r, ent, off, len, out, e);
    }
    return rc < 0 ? -1 : (ssize_t)len;
}

int tf_reader_check_header(const tf_entry *ent, tf_error *e)
{
    tf_st_header h;
    if (!tf_entry_is_tensor_file(ent))
        return 0;
    if (tf_st_parse(ent->header, ent->header_len, ent->size, ent->path, &h, e) < 0)
        return -1;
    int rc = h.ntensors == ent->ntensors ? 0
             : tf_fail(e, EIO, "%s: the header has %zu tensors, the catalog %llu", ent->path,
                       h.ntensors, (unsigned long long)ent->ntensors);
    for (size_t t = 0; rc == 0 && t < h.ntensors; t++) {
        const tf_st_tensor *ht = &h.tensors[t];
        const tf_tensor_span *ts = &ent->tensors[t];
        if (ht->dtype != ts->dtype || ht->end - ht->begin != ts->nbytes)
            rc = tf_fail(e, EIO, "%s: tensor %zu: the header says %s x %llu bytes, the catalog "
                         "%s x %llu", ent->path, t, tf_dtype_get(ht->dtype)->name,
                         (unsigned long long)(ht->end - ht->begin),
                         tf_dtype_get(ts->dtype)->name, (unsigned long long)ts->nbytes);
    }
    tf_st_free(&h);
    return rc;
}

const char *tf_reader_tensor_name(tf_reader_ctx *r, const tf_entry *ent, uint64_t t)
{
    if (!tf_entry_is_tensor_file(ent))
        return NULL;
    if (r->names_of != ent->ino) {
        if (r->names_of)
            tf_st_free(&r->names);
        r->names_of = 0;
        if (tf_st_parse(ent->header, ent->header_len, ent->size, ent->path, &r->names, NULL) < 0)
            return NULL;
        r->names_of = ent->ino;
    }
    return t < r->names.ntensors ? r->names.tensors[t].name : NULL;
}
