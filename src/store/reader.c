#include "store/reader.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/cpus.h"
#include "common/dtype.h"
#include "format/tensor_format.h"
#include "store/blob_io.h"
#include "store/cache.h"
#include "store/file_map.h"

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

/* Asks for the payloads of the n claimed blobs of a chain, and of their
 * models, all at once: the decode then finds them read, or being read,
 * instead of waiting for one read per step. */
static void will_need(tf_reader_ctx *r, tf_cache_item *const *chain, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        const tf_blob *b = tf_archive_blob(r->ar, chain[i]->key);
        if (b->model)
            tf_blob_will_need(r->ar, tf_archive_blob(r->ar, b->model - 1));
        tf_blob_will_need(r->ar, b);
    }
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
    if (rc == 0)
        will_need(r, chain, n);
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

void tf_reader_warm(tf_reader_ctx *r, uint64_t idx)
{
    tf_error e;
    tf_cache_item *it = obtain(r, idx, &e);
    if (it)
        tf_cache_release(r->cache, it);
}

void tf_reader_will_need(tf_reader_ctx *r, uint64_t idx)
{
    for (uint64_t i = idx + 1; i && !tf_cache_has(r->cache, i - 1);) {
        const tf_blob *b = tf_archive_blob(r->ar, i - 1);
        if (b->model && !tf_cache_has(r->cache, b->model - 1))
            tf_blob_will_need(r->ar, tf_archive_blob(r->ar, b->model - 1));
        tf_blob_will_need(r->ar, b);
        i = b->ref;
    }
}

int tf_reader_blob_once(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    tf_cache_item *it = tf_cache_peek(r->cache, idx);
    if (it) {
        r->hits++;
        memcpy(out, it->data, it->len);
        tf_cache_release(r->cache, it);
        return 0;
    }
    const tf_blob *b = tf_archive_blob(r->ar, idx);
    tf_cache_item *ref = b->ref ? obtain(r, b->ref - 1, e) : NULL;
    if (b->ref && !ref)
        return -1;
    int rc = decode_one(r, idx, ref ? ref->data : NULL, out, e);
    if (ref)
        tf_cache_release(r->cache, ref);
    return rc;
}

void tf_reader_seed_owned(tf_reader_ctx *r, uint64_t idx, uint8_t *data)
{
    bool claimed;
    tf_cache_item *it = tf_cache_acquire(r->cache, idx, &claimed);
    if (it && claimed) {
        tf_cache_adopt(r->cache, it, data, (size_t)tf_archive_blob(r->ar, idx)->raw_len);
        tf_cache_fill(r->cache, it);
        data = NULL;
    }
    if (it)
        tf_cache_release(r->cache, it);
    free(data);
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

/* Copies bytes [off, off+len) of a chunk run into out. */
static int read_chunks(tf_reader_ctx *r, const tf_chunk_run *run, uint64_t off, size_t len,
                       uint8_t *out, tf_error *e)
{
    for (off += run->start; len;) {
        uint64_t in = off % run->chunk_bytes;
        tf_cache_item *it = obtain(r, run->chunks[off / run->chunk_bytes], e);
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

/* Copies n bytes at `in` of piece p of a tensor file, or of an opaque
 * file (p = 0), into out. */
static int read_piece(tf_reader_ctx *r, const tf_entry *ent, uint64_t p, uint64_t in, size_t n,
                      uint8_t *out, tf_error *e)
{
    tf_chunk_run run;
    if (!tf_piece_chunks(ent, p, tf_archive_chunk_shift(r->ar), &run)) {
        memcpy(out, ent->verbatim + ent->pieces[p].stream_off + in, n);
        return 0;
    }
    if (read_chunks(r, &run, in, n, out, e) == 0)
        return 0;
    if (ent->kind == TF_ENTRY_TENSORS && ent->pieces[p].tensor != TF_PIECE_VERBATIM)
        tf_error_prefix(e, "%s: tensor \"%s\"", ent->path, tf_tensor_name(ent, ent->pieces[p].tensor));
    else
        tf_error_prefix(e, "%s", ent->path);
    return -1;
}

static int read_tensor_file(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                            uint8_t *out, tf_error *e)
{
    for (uint64_t i = tf_piece_at(ent, off); len; i++) {
        const tf_piece *p = &ent->pieces[i];
        uint64_t in = off - p->file_off;
        if (in >= p->len)
            continue; /* empty pieces */
        size_t n = p->len - in < len ? (size_t)(p->len - in) : len;
        if (read_piece(r, ent, i, in, n, out, e) < 0)
            return -1;
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
    int rc = ent->kind == TF_ENTRY_FILE ? read_piece(r, ent, 0, off, len, out, e)
                                        : read_tensor_file(r, ent, off, len, out, e);
    return rc < 0 ? -1 : (ssize_t)len;
}

/* ---- checking a tensor file's layout against its bytes ---- */

typedef struct {
    tf_reader_ctx *r;
    const tf_entry *ent;
} entry_source;

static int read_entry(void *arg, uint64_t off, void *out, size_t len, tf_error *e)
{
    const entry_source *s = arg;
    ssize_t n = tf_reader_pread(s->r, s->ent, off, len, out, e);
    if (n < 0)
        return -1;
    return (size_t)n == len ? 0 : tf_fail(e, EIO, "%s: short read at %llu", s->ent->path,
                                          (unsigned long long)off);
}

/* The first difference between two layouts of one file, or 0. */
static int compare_layouts(const tf_entry *stored, const tf_entry *parsed, tf_error *e)
{
    if (parsed->npieces != stored->npieces || parsed->ntensors != stored->ntensors)
        return tf_fail(e, EIO, "%s: the file's bytes describe %llu pieces and %llu tensors, the "
                       "catalog %llu and %llu", stored->path, (unsigned long long)parsed->npieces,
                       (unsigned long long)parsed->ntensors, (unsigned long long)stored->npieces,
                       (unsigned long long)stored->ntensors);
    for (uint64_t i = 0; i < stored->npieces; i++) {
        const tf_piece *a = &stored->pieces[i], *b = &parsed->pieces[i];
        if (a->len != b->len || a->tensor != b->tensor)
            return tf_fail(e, EIO, "%s: piece %llu differs from what the file's bytes say",
                           stored->path, (unsigned long long)i);
    }
    for (uint64_t t = 0; t < stored->ntensors; t++)
        if (stored->tensors[t].dtype != parsed->tensors[t].dtype ||
            strcmp(tf_tensor_name(stored, t), tf_tensor_name(parsed, t)) != 0)
            return tf_fail(e, EIO, "%s: tensor %llu: the file's bytes say %s \"%s\", the catalog "
                           "%s \"%s\"", stored->path, (unsigned long long)t,
                           tf_dtype_get(parsed->tensors[t].dtype)->name, tf_tensor_name(parsed, t),
                           tf_dtype_get(stored->tensors[t].dtype)->name, tf_tensor_name(stored, t));
    return 0;
}

int tf_reader_check_layout(tf_reader_ctx *r, const tf_entry *ent, tf_error *e)
{
    const tf_tensor_format *f = tf_entry_is_tensor_file(ent) ? tf_tensor_format_get(ent->format) : NULL;
    if (!f)
        return 0;
    entry_source s = { r, ent };
    tf_file_source src = { .name = ent->path, .size = ent->size, .read = read_entry, .arg = &s };
    tf_entry parsed = { .kind = TF_ENTRY_TENSORS, .path = ent->path, .size = ent->size };
    int rc = tf_tensor_format_parse(f, &src, tf_archive_chunk_shift(r->ar), &parsed, e);
    if (rc < 0)
        tf_error_prefix(e, "%s does not parse as %s", ent->path, f->name);
    else
        rc = compare_layouts(ent, &parsed, e);
    parsed.path = NULL; /* ent's */
    tf_entry_free(&parsed);
    return rc;
}

int tf_reader_why_opaque(tf_reader_ctx *r, const tf_entry *ent, tf_error *why)
{
    uint8_t head[TF_FORMAT_HEAD_BYTES];
    size_t n = ent->size < sizeof head ? (size_t)ent->size : sizeof head;
    bool claimed;
    if (ent->kind != TF_ENTRY_FILE || tf_reader_pread(r, ent, 0, n, head, why) != (ssize_t)n)
        return 0;
    const tf_tensor_format *f = tf_tensor_format_detect(head, n, ent->size, ent->path, &claimed);
    if (!f)
        return 0;
    entry_source s = { r, ent };
    tf_file_source src = { .name = ent->path, .size = ent->size, .read = read_entry, .arg = &s };
    tf_entry parsed = { .kind = TF_ENTRY_TENSORS, .path = ent->path, .size = ent->size };
    if (tf_tensor_format_parse(f, &src, tf_archive_chunk_shift(r->ar), &parsed, why) == 0)
        tf_fail(why, 0, "%s: a valid %s file, stored as opaque bytes by an earlier release",
                ent->path, f->name);
    parsed.path = NULL; /* ent's */
    tf_entry_free(&parsed);
    return 1;
}
