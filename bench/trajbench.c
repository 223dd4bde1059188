/* trajbench: ULPack on a checkpoint trajectory, next to generic
 * compressors, all measured in one run.
 *
 *   trajbench [-T N] [-r REPS] [--fast] DIR_OR_FILE...
 *
 * The trajectory is the *.safetensors files given (directories are
 * searched recursively) in natural order (step-900 before step-1000). A
 * file is a delta against the previous file of its run with its role
 * (store/ckpt_path.h): step-25.safetensors is the reference of step-50.safetensors,
 * step-25.optim.safetensors that of step-50.optim.safetensors. The first
 * file of a series has no reference and is not measured (as in the
 * paper). Of the other files, the float tensors whose reference file has
 * a tensor of the same name, dtype and shape are measured, grouped by
 * dtype: a group's payload is those tensors' bytes, its weights their
 * elements.
 *
 * Sizes, in bits per weight:
 *   ulp        the codec: a model fit per tensor, chunks of 2^20 elements,
 *              model bytes included;
 *   trajfs     what `trajpack add` stores: per chunk the smallest of ulp
 *              (charged its share of the model), the standalone codec and
 *              raw (store/encode.h), models as trajfs stores them (not
 *              counting dedup of identical chunks);
 *   entropy    the paper's model, H(b|e_r) + H(q1|b,e_r) + H(q2|b,q1,e_r)
 *              + raw tail bits: plug-in estimates per tensor, the size of
 *              an ideal static coder without tables (codec/ulp/ulp_stats.h);
 *              and the symbols' entropy without the context e_r, which
 *              says what the context is worth;
 *   zstd -19   of each file's group payload (one frame), of its byte
 *              planes (codec/bytegroup.h), and of the planes of its XOR
 *              with the reference payload (LMC's front end).
 * Speeds, in MB/s (10^6 payload bytes per second; best of REPS, default
 * 2, per file, summed over files):
 *   ulp encode (fit + encode) and decode on one thread and on N (-T,
 *   default 2; tensors and chunks in parallel with tf_pool_run_ordered), next
 *   to libzstd level 3 compression of the payload (one frame) on one
 *   thread and with N worker threads, and its decompression: what
 *   `zstd -3 --single-thread`, `zstd -3 -T N` and `zstd -d` do to it, in
 *   process and without I/O. zstd decompresses a frame on one thread.
 * Every ulp chunk is decoded and compared with the original, and the
 * bytes encoded on N threads with those encoded on one: a difference
 * aborts. --fast skips the zstd -19 rows, which take minutes on a large
 * trajectory. Progress goes to standard error.
 *
 * Targets (issues 3 and 23, reported, not asserted): ulp within 1% of
 * entropy + tables and at most 0.85x byte-grouped XOR + zstd -19; decode
 * at least 2.0x zstd -d and encode at least 1.0x zstd -3 on one thread,
 * 1.8x on two.
 *
 * Build: make bench/trajbench. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "codec/bytegroup.h"
#include "codec/codec.h"
#include "codec/ulp/ulp.h"
#include "codec/ulp/ulp_stats.h"
#include "common/zstd_frame.h"
#include "common/clock.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/malloc_tune.h"
#include "common/pool.h"
#include "format/container.h"
#include "common/dtype.h"
#include "format/safetensors.h"
#include "store/encode.h"
#include "store/ckpt_path.h"
#include "store/natsort.h"

#define CHUNK_SHIFT TF_CHUNK_SHIFT_DEFAULT
#define SLOW_LEVEL 19
#define FAST_LEVEL 3

typedef struct {
    unsigned threads; /* N */
    int reps;
    bool fast;        /* no zstd -19 */
} options;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("trajbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

/* ---- the trajectory ---- */

typedef struct {
    char **paths;
    size_t n, cap;
} path_list;

static void add_path(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->paths = realloc(l->paths, l->cap * sizeof *l->paths);
        if (!l->paths)
            die("out of memory");
    }
    if (!(l->paths[l->n++] = strdup(path)))
        die("out of memory");
}

static bool is_safetensors(const char *path)
{
    size_t n = strlen(path), suffix = strlen(".safetensors");
    return n > suffix && strcmp(path + n - suffix, ".safetensors") == 0;
}

static path_list *walk_list; /* nftw has no user argument */

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (type == FTW_F && is_safetensors(path))
        add_path(walk_list, path);
    return 0;
}

static int by_natural_order(const void *a, const void *b)
{
    return tf_natcmp(*(char *const *)a, *(char *const *)b);
}

static path_list find_checkpoints(char **args, int n)
{
    path_list l = { 0 };
    walk_list = &l;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) < 0)
            die("%s: %s", args[i], strerror(errno));
        if (!S_ISDIR(st.st_mode))
            add_path(&l, args[i]);
        else if (nftw(args[i], walk_one, 16, FTW_PHYS) < 0)
            die("%s: %s", args[i], strerror(errno));
    }
    qsort(l.paths, l.n, sizeof *l.paths, by_natural_order);
    return l;
}

typedef struct {
    char *path;
    uint8_t *bytes;
    size_t len;
    tf_st_header h;
} checkpoint;

static checkpoint *load_checkpoint(const char *path)
{
    checkpoint *c = xcalloc(1, sizeof *c);
    uint8_t *json;
    tf_error e;
    struct stat st;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) < 0)
        die("%s: %s", path, strerror(errno));
    if (tf_st_read(fd, (uint64_t)st.st_size, path, &json, &c->h, &e) < 0)
        die("%s", e.msg);
    free(json);
    c->len = (size_t)st.st_size;
    c->bytes = xcalloc(c->len, 1);
    for (size_t got = 0; got < c->len;) {
        ssize_t n = pread(fd, c->bytes + got, c->len - got, (off_t)got);
        if (n <= 0)
            die("%s: %s", path, n < 0 ? strerror(errno) : "file shrank");
        got += (size_t)n;
    }
    close(fd);
    c->path = strdup(path);
    return c;
}

static void free_checkpoint(checkpoint *c)
{
    if (!c)
        return;
    tf_st_free(&c->h);
    free(c->bytes);
    free(c->path);
    free(c);
}

static const uint8_t *tensor_data(const checkpoint *c, const tf_st_tensor *t)
{
    return c->bytes + tf_st_data_offset(&c->h, t);
}

/* The reference's tensor for t: same name, dtype and shape. */
static const tf_st_tensor *matching_tensor(const checkpoint *ref, const tf_st_tensor *t)
{
    const tf_st_tensor *r = tf_st_find(&ref->h, t->name);
    if (!r || r->dtype != t->dtype || r->ndim != t->ndim)
        return NULL;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (r->shape[d] != t->shape[d])
            return NULL;
    return r;
}

/* The last checkpoint of each series seen so far. */
typedef struct {
    char **keys;
    checkpoint **last;
    size_t n;
} series_table;

/* Makes c the last of its series; returns the one it follows (the
 * caller's to free), or NULL for the first of a series. */
static checkpoint *follow_series(series_table *s, checkpoint *c)
{
    /* A file follows the previous file of its run with its role: the
     * tensors of a sharded checkpoint are compared shard by shard. */
    tf_ckpt_path place;
    char key[2 * 4096 + 2];
    if (tf_ckpt_path_parse(c->path, &place) < 0)
        die("out of memory");
    snprintf(key, sizeof key, "%s\n%s", place.run, place.role);
    tf_ckpt_path_free(&place);
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->keys[i], key) == 0) {
            checkpoint *prev = s->last[i];
            s->last[i] = c;
            return prev;
        }
    }
    s->keys = realloc(s->keys, (s->n + 1) * sizeof *s->keys);
    s->last = realloc(s->last, (s->n + 1) * sizeof *s->last);
    if (!s->keys || !s->last || !(s->keys[s->n] = strdup(key)))
        die("out of memory");
    s->last[s->n++] = c;
    return NULL;
}

/* ---- one dtype group of one delta ---- */

/* The tensors of one dtype a delta codes, end to end in the target's data
 * order, and their reference tensors in the same layout. */
typedef struct {
    unsigned dtype, size;
    size_t n_tensors;
    size_t *tensor_end; /* tensor k is bytes [end[k-1], end[k]) */
    tf_buf src, ref;
    uint64_t unmatched; /* weights of tensors without a reference */
} payload;

static void payload_append(payload *p, const uint8_t *src, const uint8_t *ref, size_t len)
{
    p->tensor_end = realloc(p->tensor_end, (p->n_tensors + 1) * sizeof *p->tensor_end);
    if (!p->tensor_end || tf_buf_put(&p->src, src, len) < 0 || tf_buf_put(&p->ref, ref, len) < 0)
        die("out of memory");
    p->tensor_end[p->n_tensors++] = p->src.len;
}

static payload gather_payload(const checkpoint *target, const checkpoint *ref, unsigned dtype)
{
    payload p = { .dtype = dtype, .size = tf_dtype_get(dtype)->size };
    for (size_t i = 0; i < target->h.ntensors; i++) {
        const tf_st_tensor *t = &target->h.tensors[i];
        if (t->dtype != dtype || t->nelem == 0)
            continue;
        const tf_st_tensor *r = matching_tensor(ref, t);
        if (r)
            payload_append(&p, tensor_data(target, t), tensor_data(ref, r), t->end - t->begin);
        else
            p.unmatched += t->nelem;
    }
    return p;
}

static void free_payload(payload *p)
{
    free(p->tensor_end);
    tf_buf_free(&p->src);
    tf_buf_free(&p->ref);
}

static size_t tensor_begin(const payload *p, size_t k)
{
    return k ? p->tensor_end[k - 1] : 0;
}

/* A chunk of a tensor, as trajfs cuts it. */
typedef struct {
    size_t tensor, off, len; /* bytes of the payload */
    tf_buf enc;              /* ulp */
    tf_chunk_job stored;     /* what trajfs stores */
} chunk;

/* What the parallel phases share: work item i is tensor i or chunk i. */
typedef struct {
    const payload *p;
    tf_buf *models;          /* per tensor */
    size_t *chunks_of;       /* per tensor */
    chunk *chunks;
    size_t n_chunks;
    uint8_t *decoded;        /* payload-sized */
} delta;

static delta plan_delta(const payload *p)
{
    delta d = { .p = p, .models = xcalloc(p->n_tensors, sizeof *d.models),
                .chunks_of = xcalloc(p->n_tensors, sizeof *d.chunks_of),
                .decoded = xcalloc(p->src.len, 1) };
    const size_t chunk_bytes = (size_t)p->size << CHUNK_SHIFT;
    for (size_t k = 0; k < p->n_tensors; k++)
        d.chunks_of[k] = (p->tensor_end[k] - tensor_begin(p, k) + chunk_bytes - 1) / chunk_bytes;
    for (size_t k = 0; k < p->n_tensors; k++)
        d.n_chunks += d.chunks_of[k];
    d.chunks = xcalloc(d.n_chunks, sizeof *d.chunks);
    size_t c = 0;
    for (size_t k = 0; k < p->n_tensors; k++) {
        for (size_t off = tensor_begin(p, k); off < p->tensor_end[k]; off += chunk_bytes, c++) {
            size_t left = p->tensor_end[k] - off;
            d.chunks[c] = (chunk){ .tensor = k, .off = off,
                                   .len = left < chunk_bytes ? left : chunk_bytes };
        }
    }
    return d;
}

static void free_delta(delta *d)
{
    for (size_t k = 0; k < d->p->n_tensors; k++)
        tf_buf_free(&d->models[k]);
    for (size_t c = 0; c < d->n_chunks; c++) {
        tf_buf_free(&d->chunks[c].enc);
        tf_buf_free(&d->chunks[c].stored.out);
    }
    free(d->models);
    free(d->chunks_of);
    free(d->chunks);
    free(d->decoded);
}

static tf_codec_ctx chunk_ctx(const delta *d, const chunk *c)
{
    const tf_buf *model = &d->models[c->tensor];
    return (tf_codec_ctx){ .dtype = d->p->dtype, .ref = d->p->ref.data + c->off,
                           .ref_len = c->len, .model = model->data, .model_len = model->len };
}

static int fit_work(void *arg, size_t k, tf_error *e)
{
    delta *d = arg;
    size_t begin = tensor_begin(d->p, k), len = d->p->tensor_end[k] - begin;
    tf_codec_ctx ctx = { .dtype = d->p->dtype, .ref = d->p->ref.data + begin, .ref_len = len };
    d->models[k].len = 0;
    return tf_codec_ulp.fit(d->p->src.data + begin, len, &ctx, &d->models[k], e);
}

static int encode_work(void *arg, size_t i, tf_error *e)
{
    delta *d = arg;
    chunk *c = &d->chunks[i];
    tf_codec_ctx ctx = chunk_ctx(d, c);
    c->enc.len = 0;
    return tf_codec_ulp.encode(d->p->src.data + c->off, c->len, &ctx, &c->enc, e);
}

static int decode_work(void *arg, size_t i, tf_error *e)
{
    delta *d = arg;
    chunk *c = &d->chunks[i];
    tf_codec_ctx ctx = chunk_ctx(d, c);
    return tf_codec_ulp.decode(c->enc.data, c->enc.len, &ctx, d->decoded + c->off, c->len, e);
}

/* As the writer does: the model is charged to the chunks in equal shares. */
static int store_work(void *arg, size_t i, tf_error *e)
{
    delta *d = arg;
    chunk *c = &d->chunks[i];
    const tf_buf *model = &d->models[c->tensor];
    tf_buf_free(&c->stored.out);
    c->stored = (tf_chunk_job){ .src = d->p->src.data + c->off, .len = c->len,
                                .dtype = d->p->dtype, .ref = d->p->ref.data + c->off };
    c->stored.models[TF_CODEC_ULP] =
        (tf_chunk_model){ .data = model->data, .len = model->len,
                          .share = model->len / d->chunks_of[c->tensor] };
    return tf_encode_chunk(&c->stored, e);
}

/* Runs work(arg, i) for i in [0, n) on a pool of `threads` threads
 * started for it (on the calling thread alone for one). */
static void run_parallel(size_t n, unsigned threads, int (*work)(void *, size_t, tf_error *),
                         void *arg, const char *what)
{
    tf_error e;
    tf_pool *pool = threads > 1 ? tf_pool_new(threads) : NULL;
    if (threads > 1 && !pool)
        die("%s: cannot start %u threads", what, threads);
    if (tf_pool_run_ordered(pool, n, n, work, NULL, arg, &e) < 0)
        die("%s: %s", what, e.msg);
    tf_pool_free(pool);
}

static void ulp_encode(delta *d, unsigned threads)
{
    run_parallel(d->p->n_tensors, threads, fit_work, d, "ulp fit");
    run_parallel(d->n_chunks, threads, encode_work, d, "ulp encode");
}

static void ulp_decode(delta *d, unsigned threads)
{
    run_parallel(d->n_chunks, threads, decode_work, d, "ulp decode");
}

/* Seconds of the fastest of reps runs. */
static double best_of(int reps, void (*run)(delta *, unsigned), delta *d, unsigned threads)
{
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = tf_monotonic_seconds();
        run(d, threads);
        double t = tf_monotonic_seconds() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static uint64_t ulp_digest(const delta *d)
{
    uint64_t h = 0;
    for (size_t k = 0; k < d->p->n_tensors; k++)
        h = h * 0x100000001b3ull ^ tf_hash64(d->models[k].data, d->models[k].len);
    for (size_t c = 0; c < d->n_chunks; c++)
        h = h * 0x100000001b3ull ^ tf_hash64(d->chunks[c].enc.data, d->chunks[c].enc.len);
    return h;
}

static void verify_decoded(const delta *d, const char *what)
{
    for (size_t c = 0; c < d->n_chunks; c++) {
        const chunk *ch = &d->chunks[c];
        if (memcmp(d->decoded + ch->off, d->p->src.data + ch->off, ch->len))
            die("%s: chunk %zu (tensor %zu) decodes to other bytes", what, c, ch->tensor);
    }
}

/* ---- figures ---- */

/* Everything measured for one dtype (or all of them). Times in seconds;
 * [0] on one thread, [1] on N. */
typedef struct {
    uint64_t deltas, tensors, weights, bytes, unmatched;
    uint64_t ulp_chunks, ulp_tables;   /* bytes */
    uint64_t stored, stored_by_codec[TF_CODEC_COUNT];
    tf_ulp_bits entropy;
    double symbols_without_context; /* bits */
    bool slow_measured;
    uint64_t z19_raw, z19_planes, z19_xor_planes;
    double enc_s[2], dec_s[2], z3_s[2], zd_s;
} figures;

static void figures_add(figures *sum, const figures *x)
{
    sum->deltas += x->deltas;
    sum->tensors += x->tensors;
    sum->weights += x->weights;
    sum->bytes += x->bytes;
    sum->unmatched += x->unmatched;
    sum->ulp_chunks += x->ulp_chunks;
    sum->ulp_tables += x->ulp_tables;
    sum->stored += x->stored;
    for (unsigned k = 0; k < TF_CODEC_COUNT; k++)
        sum->stored_by_codec[k] += x->stored_by_codec[k];
    tf_ulp_bits_add(&sum->entropy, &x->entropy);
    sum->symbols_without_context += x->symbols_without_context;
    sum->slow_measured = sum->slow_measured || x->slow_measured;
    sum->z19_raw += x->z19_raw;
    sum->z19_planes += x->z19_planes;
    sum->z19_xor_planes += x->z19_xor_planes;
    for (int t = 0; t < 2; t++) {
        sum->enc_s[t] += x->enc_s[t];
        sum->dec_s[t] += x->dec_s[t];
        sum->z3_s[t] += x->z3_s[t];
    }
    sum->zd_s += x->zd_s;
}

/* ---- measurements of one group ---- */

static void measure_entropy(const payload *p, figures *f)
{
    tf_ulp_hist h;
    tf_error e;
    if (tf_ulp_hist_init(&h, p->dtype, &e) < 0)
        die("%s", e.msg);
    for (size_t k = 0; k < p->n_tensors; k++) {
        size_t begin = tensor_begin(p, k);
        tf_ulp_hist_clear(&h);
        tf_ulp_hist_add(&h, p->src.data + begin, p->ref.data + begin,
                        (p->tensor_end[k] - begin) / p->size);
        tf_ulp_hist_entropy(&h, &f->entropy);
        f->symbols_without_context += tf_ulp_hist_entropy_without_context(&h);
    }
    tf_ulp_hist_free(&h);
}

static void measure_ulp(delta *d, const options *o, const char *what, figures *f)
{
    /* Faults the pages in, so that no timed run pays for them. Not with
     * zeros: the compiler drops a clearing of memory from calloc. */
    memset(d->decoded, 0xff, d->p->src.len);
    f->enc_s[0] += best_of(o->reps, ulp_encode, d, 1);
    uint64_t digest = ulp_digest(d);
    f->dec_s[0] += best_of(o->reps, ulp_decode, d, 1);
    verify_decoded(d, what);
    if (o->threads > 1) {
        f->enc_s[1] += best_of(o->reps, ulp_encode, d, o->threads);
        if (ulp_digest(d) != digest)
            die("%s: the bytes encoded depend on the number of threads", what);
        memset(d->decoded, 0, d->p->src.len);
        f->dec_s[1] += best_of(o->reps, ulp_decode, d, o->threads);
        verify_decoded(d, what);
    }
    for (size_t k = 0; k < d->p->n_tensors; k++)
        f->ulp_tables += d->models[k].len;
    for (size_t c = 0; c < d->n_chunks; c++)
        f->ulp_chunks += d->chunks[c].enc.len;
}

/* Bytes trajfs stores for a model used by some chunk. */
static uint64_t stored_model_bytes(const tf_buf *model)
{
    tf_chunk_job job = { .src = model->data, .len = model->len, .dtype = TF_DT_NONE };
    tf_error e;
    if (tf_encode_chunk(&job, &e) < 0)
        die("model: %s", e.msg);
    uint64_t n = job.out.len;
    tf_buf_free(&job.out);
    return n;
}

static void measure_stored(delta *d, const options *o, figures *f)
{
    run_parallel(d->n_chunks, o->threads, store_work, d, "trajfs encode");
    bool *model_used = xcalloc(d->p->n_tensors, sizeof *model_used);
    for (size_t c = 0; c < d->n_chunks; c++) {
        const tf_chunk_job *job = &d->chunks[c].stored;
        f->stored += job->out.len;
        f->stored_by_codec[job->codec] += job->out.len;
        model_used[d->chunks[c].tensor] |= job->codec == TF_CODEC_ULP;
    }
    for (size_t k = 0; k < d->p->n_tensors; k++) {
        if (!model_used[k])
            continue;
        uint64_t n = stored_model_bytes(&d->models[k]);
        f->stored += n;
        f->stored_by_codec[TF_CODEC_ULP] += n;
    }
    free(model_used);
}

/* `zstd -LEVEL -T workers`: one frame, compressed by libzstd's workers. */
static void zstd_compress_workers(const uint8_t *src, size_t len, int level, unsigned workers,
                                  tf_buf *out)
{
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(len);
    uint8_t *dst = tf_buf_reserve(out, bound);
    if (!cc || !dst)
        die("out of memory");
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, (int)workers)))
        die("libzstd cannot compress with %u threads", workers);
    size_t n = ZSTD_compress2(cc, dst, bound, src, len);
    if (ZSTD_isError(n))
        die("zstd: %s", ZSTD_getErrorName(n));
    tf_buf_commit(out, n);
    ZSTD_freeCCtx(cc);
}

static double time_zstd_compress(const payload *p, unsigned threads, int reps, tf_buf *out)
{
    double best = INFINITY;
    tf_error e;
    for (int r = 0; r < reps; r++) {
        out->len = 0;
        double t0 = tf_monotonic_seconds();
        if (threads > 1)
            zstd_compress_workers(p->src.data, p->src.len, FAST_LEVEL, threads, out);
        else if (tf_zstd_compress(p->src.data, p->src.len, FAST_LEVEL, out, &e) < 0)
            die("%s", e.msg);
        double t = tf_monotonic_seconds() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static double time_zstd_decompress(const tf_buf *frame, const payload *p, uint8_t *dst,
                                   int reps, const char *what)
{
    double best = INFINITY;
    tf_error e;
    memset(dst, 0, p->src.len);
    for (int r = 0; r < reps; r++) {
        double t0 = tf_monotonic_seconds();
        if (tf_zstd_decompress(frame->data, frame->len, dst, p->src.len, &e) < 0)
            die("%s: %s", what, e.msg);
        double t = tf_monotonic_seconds() - t0;
        best = t < best ? t : best;
    }
    if (memcmp(dst, p->src.data, p->src.len))
        die("%s: zstd decodes to other bytes", what);
    return best;
}

static void measure_zstd(const payload *p, const options *o, uint8_t *scratch,
                         const char *what, figures *f)
{
    tf_buf frame = { 0 };
    if (o->threads > 1)
        f->z3_s[1] += time_zstd_compress(p, o->threads, o->reps, &frame);
    f->z3_s[0] += time_zstd_compress(p, 1, o->reps, &frame);
    f->zd_s += time_zstd_decompress(&frame, p, scratch, o->reps, what);
    tf_buf_free(&frame);
}

/* The zstd -19 baselines, run side by side. */
typedef struct {
    const uint8_t *in[3];
    size_t len;
    uint64_t out[3];
} slow_jobs;

static int slow_work(void *arg, size_t i, tf_error *e)
{
    slow_jobs *s = arg;
    tf_buf out = { 0 };
    int rc = tf_zstd_compress(s->in[i], s->len, SLOW_LEVEL, &out, e);
    s->out[i] = out.len;
    tf_buf_free(&out);
    return rc;
}

static void measure_slow(const payload *p, const options *o, figures *f)
{
    size_t n = p->src.len / p->size;
    uint8_t *planes = xcalloc(p->src.len, 1), *xor_planes = xcalloc(p->src.len, 1);
    uint8_t *xored = xcalloc(p->src.len, 1);
    tf_bytegroup_split(p->src.data, n, p->size, planes);
    for (size_t i = 0; i < p->src.len; i++)
        xored[i] = p->src.data[i] ^ p->ref.data[i];
    tf_bytegroup_split(xored, n, p->size, xor_planes);
    free(xored);
    slow_jobs s = { .in = { p->src.data, planes, xor_planes }, .len = p->src.len };
    fprintf(stderr, "trajbench:   zstd -%d of %s: 3 x %.1f MB\n", SLOW_LEVEL,
            tf_dtype_get(p->dtype)->name, (double)p->src.len / 1e6);
    run_parallel(3, o->threads, slow_work, &s, "zstd");
    f->z19_raw += s.out[0];
    f->z19_planes += s.out[1];
    f->z19_xor_planes += s.out[2];
    f->slow_measured = true;
    free(planes);
    free(xor_planes);
}

static void measure_group(const payload *p, const options *o, const char *what, figures *f)
{
    f->deltas++;
    f->tensors += p->n_tensors;
    f->weights += p->src.len / p->size;
    f->bytes += p->src.len;
    measure_entropy(p, f);
    delta d = plan_delta(p);
    measure_ulp(&d, o, what, f);
    measure_stored(&d, o, f);
    measure_zstd(p, o, d.decoded, what, f);
    free_delta(&d);
    if (!o->fast)
        measure_slow(p, o, f);
}

static void measure_delta(const checkpoint *target, const checkpoint *ref, const options *o,
                          figures *by_dtype)
{
    for (unsigned dt = 0; dt < TF_DT_COUNT; dt++) {
        if (!tf_dtype_is_float(dt))
            continue;
        payload p = gather_payload(target, ref, dt);
        if (p.n_tensors) {
            char what[512];
            snprintf(what, sizeof what, "%s (%s)", target->path, tf_dtype_get(dt)->name);
            measure_group(&p, o, what, &by_dtype[dt]);
        }
        by_dtype[dt].unmatched += p.unmatched;
        free_payload(&p);
    }
}

/* ---- report ---- */

typedef struct {
    const char *name;
    const figures *f;
} column;

static double bpw(uint64_t bytes, const figures *f)
{
    return f->weights ? 8.0 * (double)bytes / (double)f->weights : NAN;
}

static double mbps(double seconds, const figures *f)
{
    return seconds > 0 ? (double)f->bytes / seconds / 1e6 : NAN;
}

static double ulp_bytes(const figures *f)
{
    return (double)(f->ulp_chunks + f->ulp_tables);
}

static double entropy_bits(const figures *f)
{
    return f->entropy.b + f->entropy.q1 + f->entropy.q2 + (double)f->entropy.raw;
}

typedef double (*measure)(const figures *f);

static double m_ulp(const figures *f) { return bpw(f->ulp_chunks + f->ulp_tables, f); }
static double m_tables(const figures *f) { return bpw(f->ulp_tables, f); }
static double m_stored(const figures *f) { return bpw(f->stored, f); }
static double m_stored_ulp(const figures *f)
{
    return bpw(f->stored_by_codec[TF_CODEC_ULP], f);
}
static double m_stored_other(const figures *f)
{
    return bpw(f->stored - f->stored_by_codec[TF_CODEC_ULP], f);
}
static double m_entropy(const figures *f) { return entropy_bits(f) / (double)f->weights; }
static double m_h_b(const figures *f) { return f->entropy.b / (double)f->weights; }
static double m_h_q1(const figures *f) { return f->entropy.q1 / (double)f->weights; }
static double m_h_q2(const figures *f) { return f->entropy.q2 / (double)f->weights; }
static double m_raw(const figures *f) { return (double)f->entropy.raw / (double)f->weights; }
static double m_without_context(const figures *f)
{
    return f->symbols_without_context / (double)f->weights;
}
static double m_entropy_tables(const figures *f) { return m_entropy(f) + m_tables(f); }
static double m_z19_raw(const figures *f)
{
    return f->slow_measured ? bpw(f->z19_raw, f) : NAN;
}
static double m_z19_planes(const figures *f)
{
    return f->slow_measured ? bpw(f->z19_planes, f) : NAN;
}
static double m_z19_xor(const figures *f)
{
    return f->slow_measured ? bpw(f->z19_xor_planes, f) : NAN;
}
static double m_vs_entropy(const figures *f)
{
    return ulp_bytes(f) * 8 / (entropy_bits(f) + 8.0 * (double)f->ulp_tables);
}
static double m_vs_xor(const figures *f)
{
    return f->slow_measured ? ulp_bytes(f) / (double)f->z19_xor_planes : NAN;
}
static double m_enc1(const figures *f) { return mbps(f->enc_s[0], f); }
static double m_encn(const figures *f) { return mbps(f->enc_s[1], f); }
static double m_dec1(const figures *f) { return mbps(f->dec_s[0], f); }
static double m_decn(const figures *f) { return mbps(f->dec_s[1], f); }
static double m_z3_1(const figures *f) { return mbps(f->z3_s[0], f); }
static double m_z3_n(const figures *f) { return mbps(f->z3_s[1], f); }
static double m_zd(const figures *f) { return mbps(f->zd_s, f); }
static double m_enc1_vs(const figures *f) { return m_enc1(f) / m_z3_1(f); }
static double m_encn_vs(const figures *f) { return m_encn(f) / m_z3_1(f); }
static double m_dec1_vs(const figures *f) { return m_dec1(f) / m_zd(f); }
static double m_decn_vs(const figures *f) { return m_decn(f) / m_zd(f); }

static void print_row(const char *label, const column *cols, size_t n, measure m,
                      int decimals)
{
    printf("%-44s", label);
    for (size_t c = 0; c < n; c++) {
        double v = m(cols[c].f);
        if (isfinite(v))
            printf("%10.*f", decimals, v);
        else
            printf("%10s", "-");
    }
    putchar('\n');
}

static void print_header(const char *title, const column *cols, size_t n)
{
    printf("\n%-44s", title);
    for (size_t c = 0; c < n; c++)
        printf("%10s", cols[c].name);
    putchar('\n');
}

static void print_counts(const column *cols, size_t n)
{
    print_header("", cols, n);
    const char *labels[] = { "deltas (files)", "tensors", "weights", "payload MB" };
    for (int r = 0; r < 4; r++) {
        printf("%-44s", labels[r]);
        for (size_t c = 0; c < n; c++) {
            const figures *f = cols[c].f;
            uint64_t v[] = { f->deltas, f->tensors, f->weights, f->bytes };
            if (r == 3)
                printf("%10.1f", (double)v[r] / 1e6);
            else
                printf("%10llu", (unsigned long long)v[r]);
        }
        putchar('\n');
    }
}

static void print_sizes(const column *cols, size_t n)
{
    static const struct {
        const char *label;
        measure m;
    } rows[] = {
        { "ulp (chunks + tables)", m_ulp },
        { "  of which tables", m_tables },
        { "trajfs stores (best codec per chunk)", m_stored },
        { "  in ulp chunks and their models", m_stored_ulp },
        { "  in other codecs", m_stored_other },
        { "entropy of the paper's model, no tables", m_entropy },
        { "  H(b | e_r)", m_h_b },
        { "  H(q1 | b, e_r)", m_h_q1 },
        { "  H(q2 | b, q1, e_r)", m_h_q2 },
        { "  raw tail", m_raw },
        { "symbols' entropy without e_r", m_without_context },
        { "entropy + ulp tables", m_entropy_tables },
        { "zstd -19", m_z19_raw },
        { "zstd -19, byte-grouped", m_z19_planes },
        { "zstd -19, byte-grouped XOR reference", m_z19_xor },
    };
    print_header("size, bits per weight", cols, n);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        print_row(rows[r].label, cols, n, rows[r].m, 4);
    print_header("size targets", cols, n);
    print_row("ulp / (entropy + tables)     [<= 1.01]", cols, n, m_vs_entropy, 4);
    print_row("ulp / XOR zstd -19           [<= 0.85]", cols, n, m_vs_xor, 4);
}

/* Rows whose label has a %u (the thread count) are the parallel runs:
 * left out with -T 1. */
static void print_speeds(const column *cols, size_t n, const options *o)
{
    static const struct {
        const char *label;
        int decimals;
        measure m;
    } rows[] = {
        { "ulp encode (fit + encode), 1 thread", 1, m_enc1 },
        { "ulp encode (fit + encode), %u threads", 1, m_encn },
        { "zstd -3 --single-thread", 1, m_z3_1 },
        { "zstd -3 -T%u", 1, m_z3_n },
        { "ulp decode, 1 thread", 1, m_dec1 },
        { "ulp decode, %u threads", 1, m_decn },
        { "zstd -d", 1, m_zd },
        { NULL, 0, NULL }, /* targets */
        { "ulp encode 1 thread / zstd -3  [>= 1.0]", 2, m_enc1_vs },
        { "ulp encode %u threads / zstd -3 [>= 1.8]", 2, m_encn_vs },
        { "ulp decode 1 thread / zstd -d  [>= 2.0]", 2, m_dec1_vs },
        { "ulp decode %u threads / zstd -d [>= 1.8]", 2, m_decn_vs },
    };
    char title[64];
    snprintf(title, sizeof title, "speed, MB/s (best of %d)", o->reps);
    print_header(title, cols, n);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char label[64];
        if (!rows[r].label) {
            print_header("speed targets", cols, n);
            continue;
        }
        if (strstr(rows[r].label, "%u") && o->threads == 1)
            continue;
        snprintf(label, sizeof label, rows[r].label, o->threads);
        print_row(label, cols, n, rows[r].m, rows[r].decimals);
    }
}

static void report(const figures *by_dtype, const options *o)
{
    figures total = { 0 };
    column cols[TF_DT_COUNT + 1];
    size_t n = 0;
    for (unsigned dt = 0; dt < TF_DT_COUNT; dt++) {
        if (!by_dtype[dt].weights)
            continue;
        cols[n++] = (column){ tf_dtype_get(dt)->name, &by_dtype[dt] };
        figures_add(&total, &by_dtype[dt]);
    }
    if (!n)
        die("no tensor has a reference: nothing measured");
    cols[n++] = (column){ "total", &total };
    print_counts(cols, n);
    print_sizes(cols, n);
    print_speeds(cols, n, o);
    if (total.unmatched)
        printf("\n%llu weights of float tensors without a reference tensor were not measured\n",
               (unsigned long long)total.unmatched);
    if (o->fast)
        printf("\n--fast: zstd -19 not measured\n");
}

/* ---- main ---- */

static const char usage[] =
    "Usage: trajbench [-T N] [-r REPS] [--fast] DIR_OR_FILE...\n"
    "Measures ULPack on the trajectory of the *.safetensors files given\n"
    "(each against the previous file of its series, in natural order) next\n"
    "to zstd: sizes in bits per weight, speeds in MB/s. See bench/trajbench.c.\n"
    "  -T N       threads for the parallel runs (default 2)\n"
    "  -r REPS    timing repetitions, the best counts (default 2)\n"
    "  --fast     skip the zstd -19 baselines\n";

static unsigned parse_count(const char *s, unsigned max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || !*s || v < 1 || v > max)
        die("'%s' is not a number from 1 to %u", s, max);
    return (unsigned)v;
}

static options parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "fast", no_argument, NULL, 'f' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    options o = { .threads = 2, .reps = 2 };
    int c;
    while ((c = getopt_long(argc, argv, "T:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'T': o.threads = parse_count(optarg, 256); break;
        case 'r': o.reps = (int)parse_count(optarg, 100); break;
        case 'f': o.fast = true; break;
        case 'h': fputs(usage, stdout); exit(0);
        default: fputs(usage, stderr); exit(2);
        }
    }
    if (optind == argc) {
        fputs(usage, stderr);
        exit(2);
    }
    return o;
}

int main(int argc, char **argv)
{
    tf_malloc_reuse(); /* as trajpack and trajfs, whose codecs are timed */
    options o = parse_options(argc, argv);
    path_list files = find_checkpoints(argv + optind, argc - optind);
    static figures by_dtype[TF_DT_COUNT];
    series_table series = { 0 };
    double t0 = tf_monotonic_seconds();
    for (size_t i = 0; i < files.n; i++) {
        checkpoint *c = load_checkpoint(files.paths[i]);
        checkpoint *ref = follow_series(&series, c);
        fprintf(stderr, "trajbench: [%zu/%zu] %6.0fs %s", i + 1, files.n, tf_monotonic_seconds() - t0, c->path);
        if (ref) {
            fprintf(stderr, " against %s\n", ref->path);
            measure_delta(c, ref, &o, by_dtype);
        } else {
            fputs(": first of its series, not measured\n", stderr);
        }
        free_checkpoint(ref);
    }
    fprintf(stderr, "trajbench: done in %.0fs\n", tf_monotonic_seconds() - t0);
    printf("trajbench: %zu files, -T %u, chunks of 2^%d elements%s\n", files.n, o.threads,
           CHUNK_SHIFT, o.fast ? ", --fast" : "");
    report(by_dtype, &o);
    for (size_t s = 0; s < series.n; s++) {
        free_checkpoint(series.last[s]);
        free(series.keys[s]);
    }
    free(series.keys);
    free(series.last);
    for (size_t i = 0; i < files.n; i++)
        free(files.paths[i]);
    free(files.paths);
    return 0;
}
