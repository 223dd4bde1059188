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

#define POOL_MAX 128

/* Buffers kept between decodes: filling one that is already mapped costs
 * no allocation and no page faults (a fresh multi-MiB buffer is mapped
 * and zeroed page by page). At most `keep` are kept, so the memory held
 * stays bounded whatever the number of threads; more decodes at once use
 * buffers of their own. */
typedef struct {
    pthread_mutex_t lock;
    tf_buf *bufs[POOL_MAX];
    size_t n, keep;
} buf_pool;

struct tf_reader_ctx {
    tf_archive *ar;
    tf_cache *cache;
    buf_pool payloads; /* encoded bytes: one per decode */
    buf_pool steps;    /* a chain's steps between: two per decode */
    /* Chains decoded at once, at most one per CPU: the kernel sends a
     * file read in order as a dozen requests at a time, and a dozen
     * decodes on two CPUs took a fifth more CPU time than two, in the
     * fresh buffers each one faults in and in switching between them. */
    pthread_mutex_t slots_lock;
    pthread_cond_t slot_freed;
    unsigned slots_free;
    _Atomic uint64_t decoded, hits;
};

static void pool_init(buf_pool *p, size_t keep)
{
    pthread_mutex_init(&p->lock, NULL);
    p->n = 0;
    p->keep = keep < POOL_MAX ? keep : POOL_MAX;
}

static void destroy_buf(tf_buf *b)
{
    tf_buf_free(b);
    free(b);
}

static void pool_destroy(buf_pool *p)
{
    while (p->n)
        destroy_buf(p->bufs[--p->n]);
    pthread_mutex_destroy(&p->lock);
}

/* An empty buffer, a kept one when there is; NULL when out of memory. */
static tf_buf *pool_take(buf_pool *p)
{
    pthread_mutex_lock(&p->lock);
    tf_buf *b = p->n ? p->bufs[--p->n] : NULL;
    pthread_mutex_unlock(&p->lock);
    return b ? b : calloc(1, sizeof *b);
}

static void pool_give(buf_pool *p, tf_buf *b)
{
    if (!b)
        return;
    b->len = 0;
    pthread_mutex_lock(&p->lock);
    if (p->n < p->keep) {
        p->bufs[p->n++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    if (b)
        destroy_buf(b);
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
    /* one decode per CPU at once: more gain nothing */
    unsigned cpus = tf_online_cpus();
    pool_init(&r->payloads, cpus);
    pool_init(&r->steps, 2 * (size_t)cpus);
    pthread_mutex_init(&r->slots_lock, NULL);
    pthread_cond_init(&r->slot_freed, NULL);
    r->slots_free = cpus ? cpus : 1;
    return r;
}

void tf_reader_free(tf_reader_ctx *r)
{
    if (!r)
        return;
    tf_cache_free(r->cache);
    pool_destroy(&r->payloads);
    pool_destroy(&r->steps);
    pthread_cond_destroy(&r->slot_freed);
    pthread_mutex_destroy(&r->slots_lock);
    free(r);
}

tf_reader_counts tf_reader_get_counts(const tf_reader_ctx *r)
{
    return (tf_reader_counts){ .decoded = r->decoded, .hits = r->hits };
}

static tf_cache_item *obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e);

/* Reads and checks a blob's payload into a payload buffer (each decode
 * has its own, so threads decode side by side). */
static tf_buf *read_payload(tf_reader_ctx *r, uint64_t idx, tf_error *e)
{
    tf_buf *buf = pool_take(&r->payloads);
    int rc = buf ? tf_blob_read_payload(r->ar, tf_archive_blob(r->ar, idx), buf, e)
                 : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_error_prefix(e, "blob %llu", (unsigned long long)idx);
        pool_give(&r->payloads, buf);
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
    pool_give(&r->payloads, payload);
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

static void take_slot(tf_reader_ctx *r)
{
    pthread_mutex_lock(&r->slots_lock);
    while (!r->slots_free)
        pthread_cond_wait(&r->slot_freed, &r->slots_lock);
    r->slots_free--;
    pthread_mutex_unlock(&r->slots_lock);
}

static void give_slot(tf_reader_ctx *r)
{
    pthread_mutex_lock(&r->slots_lock);
    r->slots_free++;
    pthread_cond_signal(&r->slot_freed);
    pthread_mutex_unlock(&r->slots_lock);
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
        w->chain[w->n] = i;
        w->models[w->n++] = NULL;
        if (b->model) {
            /* Models are self-contained earlier blobs: one level deep, and
             * a wait for one is a wait on a smaller key (see
             * tf_cache_acquire). */
            w->models[w->n - 1] = obtain(r, b->model - 1, e);
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
            *buf = pool_take(&r->steps);
        size_t len = (size_t)tf_archive_blob(r->ar, w->chain[i])->raw_len;
        uint8_t *step = *buf ? ((*buf)->len = 0, tf_buf_reserve(*buf, len)) : NULL;
        rc = step ? decode_one(r, w->chain[i], ref, w->models[i], step, false, e)
                  : tf_fail(e, ENOMEM, "out of memory for a chain step");
        ref = step;
    }
    if (rc == 0)
        rc = decode_one(r, w->chain[0], ref, w->models[0], out, true, e);
    pool_give(&r->steps, bufs[0]);
    pool_give(&r->steps, bufs[1]);
    return rc;
}

/* Decodes blob idx into out (its raw_len bytes), its reference chain
 * first. */
static int decode_chain(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e)
{
    chain_walk w;
    int rc = walk_chain(r, idx, &w, e);
    if (rc == 0) {
        will_need(r, w.chain, w.n);
        take_slot(r);
        rc = decode_walk(r, &w, out, e);
        give_slot(r);
    }
    walk_release(r, &w);
    return rc;
}

/* Returns blob idx reconstructed, held in the cache; threads asking for
 * it at once decode it once. */
static tf_cache_item *obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e)
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
    uint8_t *data = tf_cache_buffer(r->cache, it, (size_t)tf_archive_blob(r->ar, idx)->raw_len);
    int rc = data ? decode_chain(r, idx, data, e) : tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_cache_abandon(r->cache, it);
        return NULL;
    }
    tf_cache_fill(r->cache, it);
    return it;
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
    if (!it)
        return decode_chain(r, idx, out, e);
    r->hits++;
    memcpy(out, it->data, it->len);
    tf_cache_release(r->cache, it);
    return 0;
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

/* Where a read's bytes go: copied to out, or, with view, recorded where
 * they lie (the cached blobs holding them stay held). */
typedef struct {
    tf_reader_ctx *r;
    uint8_t *out;
    tf_read_view *view;
} sink;

static int view_grow(void **p, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Sends n bytes at p to the sink; `it`, the cached blob holding them (or
 * NULL), is the sink's to release. */
static int sink_put(sink *s, tf_cache_item *it, const uint8_t *p, size_t n, tf_error *e)
{
    if (!s->view) {
        memcpy(s->out, p, n);
        s->out += n;
        if (it)
            tf_cache_release(s->r->cache, it);
        return 0;
    }
    tf_read_view *v = s->view;
    bool held = false;
    if (it && v->nheld && v->held[v->nheld - 1] == it) {
        tf_cache_release(s->r->cache, it); /* held once is enough */
        held = true;
    }
    if (v->n && (const uint8_t *)v->iov[v->n - 1].iov_base + v->iov[v->n - 1].iov_len == p) {
        v->iov[v->n - 1].iov_len += n;
    } else if (v->n == TF_READ_VIEW_MAX ||
               view_grow((void **)&v->iov, &v->iov_cap, v->n + 1, sizeof *v->iov) < 0) {
        if (it && !held)
            tf_cache_release(s->r->cache, it);
        return tf_fail(e, v->n == TF_READ_VIEW_MAX ? E2BIG : ENOMEM,
                       "a read of more than %d pieces", TF_READ_VIEW_MAX);
    } else {
        v->iov[v->n++] = (struct iovec){ .iov_base = (void *)p, .iov_len = n };
    }
    if (it && !held) {
        if (view_grow((void **)&v->held, &v->held_cap, v->nheld + 1, sizeof *v->held) < 0) {
            tf_cache_release(s->r->cache, it);
            return tf_fail(e, ENOMEM, "out of memory");
        }
        v->held[v->nheld++] = it;
    }
    return 0;
}

/* Sends bytes [off, off+len) of a chunk run to the sink. */
static int read_chunks(sink *s, const tf_chunk_run *run, uint64_t off, size_t len, tf_error *e)
{
    for (off += run->start; len;) {
        uint64_t in = off % run->chunk_bytes;
        tf_cache_item *it = obtain(s->r, run->chunks[off / run->chunk_bytes], e);
        if (!it)
            return -1;
        size_t n = it->len - in < len ? (size_t)(it->len - in) : len;
        if (sink_put(s, it, it->data + in, n, e) < 0)
            return -1;
        off += n;
        len -= n;
    }
    return 0;
}

/* Sends n bytes at `in` of piece p of a tensor file, or of an opaque
 * file (p = 0), to the sink. */
static int read_piece(sink *s, const tf_entry *ent, uint64_t p, uint64_t in, size_t n,
                      tf_error *e)
{
    tf_chunk_run run;
    if (!tf_piece_chunks(ent, p, tf_archive_chunk_shift(s->r->ar), &run))
        return sink_put(s, NULL, ent->verbatim + ent->pieces[p].stream_off + in, n, e);
    if (read_chunks(s, &run, in, n, e) == 0)
        return 0;
    if (e && e->errnum == E2BIG)
        return -1;
    if (ent->kind == TF_ENTRY_TENSORS && ent->pieces[p].tensor != TF_PIECE_VERBATIM)
        tf_error_prefix(e, "%s: tensor \"%s\"", ent->path, tf_tensor_name(ent, ent->pieces[p].tensor));
    else
        tf_error_prefix(e, "%s", ent->path);
    return -1;
}

static int read_tensor_file(sink *s, const tf_entry *ent, uint64_t off, size_t len, tf_error *e)
{
    for (uint64_t i = tf_piece_at(ent, off); len; i++) {
        const tf_piece *p = &ent->pieces[i];
        uint64_t in = off - p->file_off;
        if (in >= p->len)
            continue; /* empty pieces */
        size_t n = p->len - in < len ? (size_t)(p->len - in) : len;
        if (read_piece(s, ent, i, in, n, e) < 0)
            return -1;
        off += n;
        len -= n;
    }
    return 0;
}

static ssize_t read_entry_to(sink *s, const tf_entry *ent, uint64_t off, size_t len, tf_error *e)
{
    if (!tf_entry_is_regular(ent))
        return tf_fail(e, EISDIR, "%s: not a regular file", ent->path);
    if (off >= ent->size)
        return 0;
    if (len > ent->size - off)
        len = (size_t)(ent->size - off);
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    int rc = ent->kind == TF_ENTRY_FILE ? read_piece(s, ent, 0, off, len, e)
                                        : read_tensor_file(s, ent, off, len, e);
    return rc < 0 ? -1 : (ssize_t)len;
}

ssize_t tf_reader_pread(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                        uint8_t *out, tf_error *e)
{
    sink s = { .r = r, .out = out };
    return read_entry_to(&s, ent, off, len, e);
}

ssize_t tf_reader_view(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                       tf_read_view *v, tf_error *e)
{
    v->n = v->nheld = 0;
    sink s = { .r = r, .view = v };
    ssize_t got = read_entry_to(&s, ent, off, len, e);
    if (got < 0)
        tf_reader_view_release(r, v);
    return got;
}

void tf_reader_view_release(tf_reader_ctx *r, tf_read_view *v)
{
    for (size_t i = 0; i < v->nheld; i++)
        tf_cache_release(r->cache, v->held[i]);
    v->n = v->nheld = 0;
}

void tf_read_view_free(tf_read_view *v)
{
    free(v->iov);
    free(v->held);
    *v = (tf_read_view){ 0 };
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
