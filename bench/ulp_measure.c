/* ulp_measure: ULPack on a real checkpoint trajectory.
 *
 *   ulp_measure [-c CHUNK_ELEMS] [-r REPS] [-s] FILE0 FILE1 [FILE2 ...]
 *
 * The files are safetensors checkpoints in trajectory order. For every
 * consecutive pair, each float tensor of the later file is coded against
 * the same tensor (name, dtype, size) of the earlier one: fit on the whole
 * tensor, encode in chunks of CHUNK_ELEMS (default 2^20), decode, verify.
 * Per pair and dtype it prints
 *   - bits per weight of the ulp output (model + chunks), and of the
 *     model alone;
 *   - the paper model's empirical entropy H(b,q1,q2 | e_r) + raw bits
 *     (plug-in, no table cost);
 *   - single-threaded encode (and fit + encode) and decode throughput,
 *     best of REPS (default 1) for each of fit, encode and decode, next to
 *     libzstd level 3 compression and decompression of the whole later
 *     file (what `zstd -3` / `zstd -d` do, single-threaded, in process).
 * With three or more files it also estimates what conditioning on the
 * previous residual (reference vs its own reference) would save.
 * -s adds the design studies: table precision and joint vs separate
 * coding of (b, q1, q2). The last line is a digest of every byte fit and
 * encode wrote: an optimization of the codec must leave it unchanged.
 * TRAJFS_SIMD=none or avx2 in the environment caps the codec's SIMD code
 * (common/simd.h); -c with a small chunk shows per-call setup costs.
 * Built by `make` (bench/ulp_measure). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "codec/entropy/rans.h"
#include "codec/ulp/ulp.h"
#include "common/dtype.h"

/* ---- files ---- */

typedef struct {
    char name[256];
    unsigned dtype;
    size_t begin, end; /* byte range in the file's data section */
} tensor;

typedef struct {
    const char *path;
    uint8_t *bytes;
    size_t len;
    const uint8_t *data; /* after the header */
    size_t data_len;
    tensor *tensors;
    size_t n_tensors;
} checkpoint;

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "ulp_measure: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(1);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(size > 0 ? (size_t)size : 1);
    if (!p || size < 0 || fread(p, 1, (size_t)size, f) != (size_t)size)
        die("cannot read %s", path);
    fclose(f);
    *len = (size_t)size;
    return p;
}

/* A minimal JSON walker for the safetensors header: an object of
 * objects, each with "dtype" (string) and "data_offsets" ([a, b]). */
typedef struct {
    const char *p, *end;
    int bad;
} json;

static void skip_ws(json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static int eat(json *j, char c)
{
    skip_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

/* The raw (still escaped) contents of a string. */
static void read_string(json *j, const char **s, size_t *n)
{
    if (!eat(j, '"')) {
        j->bad = 1;
        return;
    }
    *s = j->p;
    while (j->p < j->end && *j->p != '"')
        j->p += *j->p == '\\' ? 2 : 1;
    if (j->p >= j->end) {
        j->bad = 1;
        return;
    }
    *n = (size_t)(j->p - *s);
    j->p++;
}

static void skip_value(json *j, int depth)
{
    skip_ws(j);
    if (j->p >= j->end || depth > 32) {
        j->bad = 1;
        return;
    }
    char c = *j->p;
    if (c == '"') {
        const char *s;
        size_t n;
        read_string(j, &s, &n);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (eat(j, close))
            return;
        do {
            if (c == '{') {
                const char *s;
                size_t n;
                read_string(j, &s, &n);
                if (!eat(j, ':'))
                    j->bad = 1;
            }
            skip_value(j, depth + 1);
        } while (!j->bad && eat(j, ','));
        if (!eat(j, close))
            j->bad = 1;
    } else {
        while (j->p < j->end && !strchr(",}] \n\r\t", *j->p))
            j->p++;
    }
}

static size_t read_number(json *j)
{
    skip_ws(j);
    char *endp;
    unsigned long long v = strtoull(j->p, &endp, 10);
    if (endp == j->p || endp > j->end)
        j->bad = 1;
    j->p = endp;
    return (size_t)v;
}

static void read_tensor(json *j, tensor *t)
{
    if (!eat(j, '{')) {
        j->bad = 1;
        return;
    }
    t->dtype = TF_DT_NONE;
    t->begin = t->end = 0;
    do {
        const char *key = "", *s = "";
        size_t key_len = 0, n = 0;
        read_string(j, &key, &key_len);
        if (!eat(j, ':'))
            j->bad = 1;
        if (key_len == 5 && !memcmp(key, "dtype", 5)) {
            read_string(j, &s, &n);
            t->dtype = tf_dtype_from_name(s, n);
        } else if (key_len == 12 && !memcmp(key, "data_offsets", 12)) {
            if (!eat(j, '['))
                j->bad = 1;
            t->begin = read_number(j);
            if (!eat(j, ','))
                j->bad = 1;
            t->end = read_number(j);
            if (!eat(j, ']'))
                j->bad = 1;
        } else {
            skip_value(j, 1);
        }
    } while (!j->bad && eat(j, ','));
    if (!eat(j, '}'))
        j->bad = 1;
}

static void load_checkpoint(const char *path, checkpoint *c)
{
    *c = (checkpoint){ .path = path };
    c->bytes = read_file(path, &c->len);
    if (c->len < 8)
        die("%s: not a safetensors file", path);
    uint64_t head = 0;
    for (int i = 7; i >= 0; i--)
        head = head << 8 | c->bytes[i];
    if (head > c->len - 8)
        die("%s: header length out of range", path);
    c->data = c->bytes + 8 + head;
    c->data_len = c->len - 8 - head;
    json j = { (const char *)c->bytes + 8, (const char *)c->bytes + 8 + head, 0 };
    size_t cap = 64;
    c->tensors = malloc(cap * sizeof *c->tensors);
    if (!eat(&j, '{'))
        die("%s: header is not a JSON object", path);
    do {
        const char *name;
        size_t n;
        read_string(&j, &name, &n);
        if (!eat(&j, ':') || j.bad)
            break;
        if (n == 12 && !memcmp(name, "__metadata__", 12)) {
            skip_value(&j, 1);
            continue;
        }
        if (c->n_tensors == cap)
            c->tensors = realloc(c->tensors, (cap *= 2) * sizeof *c->tensors);
        tensor *t = &c->tensors[c->n_tensors];
        snprintf(t->name, sizeof t->name, "%.*s", (int)n, name);
        read_tensor(&j, t);
        if (!j.bad && t->begin <= t->end && t->end <= c->data_len)
            c->n_tensors++;
    } while (!j.bad && eat(&j, ','));
    if (j.bad)
        die("%s: cannot parse the header", path);
}

static const tensor *find_tensor(const checkpoint *c, const tensor *like)
{
    for (size_t i = 0; i < c->n_tensors; i++) {
        const tensor *t = &c->tensors[i];
        if (!strcmp(t->name, like->name) && t->dtype == like->dtype &&
            t->end - t->begin == like->end - like->begin)
            return t;
    }
    return NULL;
}

/* CPU time of this (single-threaded) process: other load on the machine
 * does not count against it. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the paper's model, measured ---- */

typedef struct {
    unsigned bytes, width, man_bits, n_ctx, n_sym;
    uint64_t mask;
} format;

static format format_of(unsigned dtype)
{
    const tf_dtype_info *d = tf_dtype_get(dtype);
    return (format){ .bytes = d->size, .width = 8 * d->size, .man_bits = d->man_bits,
                     .n_ctx = 1u << d->exp_bits, .n_sym = tf_ulp_symbol_count(8 * d->size),
                     .mask = tf_ulp_mask(8 * d->size) };
}

static uint64_t load(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static unsigned context_of(const format *f, uint64_t r)
{
    return (unsigned)(r >> f->man_bits) & (f->n_ctx - 1);
}


static size_t occupied_cells(const uint64_t *counts, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += counts[i] != 0;
    return k;
}

/* Counts of (e_r, symbol) and the raw bits of x against r. */
static void count_model(const format *f, const uint8_t *x, const uint8_t *r, size_t n,
                        uint64_t *counts, uint64_t *raw_bits)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t rv = load(r + i * f->bytes, f->bytes);
        uint64_t z = tf_ulp_residual(load(x + i * f->bytes, f->bytes), rv, f->width);
        unsigned n_raw, sym = tf_ulp_symbol(z, &n_raw);
        counts[(size_t)context_of(f, rv) * f->n_sym + sym]++;
        *raw_bits += n_raw;
    }
}

/* ---- accounting ---- */

typedef struct {
    uint64_t elems, tensors;
    double model_bytes, chunk_bytes, entropy_bits;
    double fit_s, enc_s, dec_s;
    /* previous-residual study (bits, over prev_elems weights) */
    double prev_elems, prev_base, prev_sign, prev_b, prev_both, sign_alone, cells_base, cells_sign,
        cells_b, cells_both;
    /* -s studies (bits) */
    double prec_bits[TF_RANS_MAX_PREC + 1], prec_table[TF_RANS_MAX_PREC + 1];
    double sep_bits, sep_table, joint_bits, joint_table;
    double dec_joint_s, dec_sep_s;
} totals;

static totals by_dtype[TF_DT_COUNT];
static int study, reps = 1;

/* ---- coding one tensor ---- */

static void fail_codec(const char *what, const tensor *t, const tf_error *e)
{
    fprintf(stderr, "ulp_measure: %s %s: %s\n", what, t->name, e->msg);
    exit(1);
}

/* Encodes x against r chunk by chunk into enc (chunk ends in ends[]);
 * returns the seconds taken. */
static double encode_chunks(const tensor *t, const uint8_t *x, const uint8_t *r, size_t chunk,
                            const tf_buf *model, tf_buf *enc, size_t *ends)
{
    size_t len = t->end - t->begin, n_chunks = 0;
    tf_error e;
    enc->len = 0;
    double t0 = now();
    for (size_t at = 0; at < len || n_chunks == 0; at += chunk) {
        size_t k = len - at < chunk ? len - at : chunk;
        tf_codec_ctx c = { .dtype = t->dtype, .ref = r + at, .ref_len = k,
                           .model = model->data, .model_len = model->len };
        if (tf_codec_ulp.encode(x + at, k, &c, enc, &e) < 0)
            fail_codec("encode", t, &e);
        ends[n_chunks++] = enc->len;
        if (len == 0)
            break;
    }
    return now() - t0;
}

static double decode_chunks(const tensor *t, const uint8_t *r, size_t chunk,
                            const tf_buf *model, const tf_buf *enc, const size_t *ends,
                            uint8_t *got)
{
    size_t len = t->end - t->begin, from = 0;
    tf_error e;
    double t0 = now();
    for (size_t i = 0, at = 0; at < len || i == 0; i++, at += chunk) {
        size_t k = len - at < chunk ? len - at : chunk;
        tf_codec_ctx c = { .dtype = t->dtype, .ref = r + at, .ref_len = k,
                           .model = model->data, .model_len = model->len };
        if (tf_codec_ulp.decode(enc->data + from, ends[i] - from, &c, got + at, k, &e) < 0)
            fail_codec("decode", t, &e);
        from = ends[i];
        if (len == 0)
            break;
    }
    return now() - t0;
}

/* A digest of every byte fit and encode wrote, to check that a faster
 * codec writes the same bytes (FNV-1a over 64-bit words, then the tail). */
static uint64_t output_digest = 0xcbf29ce484222325ull;

static void digest_add(uint64_t *h, const uint8_t *p, size_t n)
{
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        *h = (*h ^ v) * 0x100000001b3ull;
    }
    for (; n; p++, n--)
        *h = (*h ^ *p) * 0x100000001b3ull;
}

/* Fit, encode, decode (best of `reps` timings; output buffers are
 * touched beforehand so that page faults are not timed), verify. */
static void code_tensor(const tensor *t, const uint8_t *x, const uint8_t *r, size_t chunk_elems,
                        totals *acc)
{
    format f = format_of(t->dtype);
    size_t len = t->end - t->begin, n = len / f.bytes, chunk = chunk_elems * f.bytes;
    tf_codec_ctx ctx = { .dtype = t->dtype, .ref = r, .ref_len = len };
    tf_buf model = { 0 }, enc = { 0 };
    tf_error e;
    double fit_s = 1e9, enc_s = 1e9, dec_s = 1e9;
    for (int rep = 0; rep < reps; rep++) {
        model.len = 0;
        double t0 = now();
        if (tf_codec_ulp.fit(x, len, &ctx, &model, &e) < 0)
            fail_codec("fit", t, &e);
        double tf = now() - t0;
        fit_s = tf < fit_s ? tf : fit_s;
    }
    size_t *ends = malloc((len / chunk + 2) * sizeof *ends);
    uint8_t *got = malloc(len + 1);
    memset(got, 0, len + 1);
    memset(tf_buf_reserve(&enc, 2 * len + 4096), 0, 2 * len + 4096);
    for (int rep = 0; rep < reps; rep++) {
        double te = encode_chunks(t, x, r, chunk, &model, &enc, ends);
        double td = decode_chunks(t, r, chunk, &model, &enc, ends, got);
        enc_s = te < enc_s ? te : enc_s;
        dec_s = td < dec_s ? td : dec_s;
    }
    if (len && memcmp(got, x, len))
        die("%s: decoded bytes differ", t->name);
    digest_add(&output_digest, model.data, model.len);
    digest_add(&output_digest, enc.data, enc.len);

    uint64_t *counts = calloc((size_t)f.n_ctx * f.n_sym, sizeof *counts), raw_bits = 0;
    count_model(&f, x, r, n, counts, &raw_bits);
    acc->entropy_bits += tf_rans_entropy_bits(counts, f.n_ctx, f.n_sym) + (double)raw_bits;
    acc->elems += n;
    acc->tensors++;
    acc->model_bytes += (double)model.len;
    acc->chunk_bytes += (double)enc.len;
    acc->fit_s += fit_s;
    acc->enc_s += enc_s;
    acc->dec_s += dec_s;
    free(counts);
    free(got);
    free(ends);
    tf_buf_free(&model);
    tf_buf_free(&enc);
}

/* ---- beyond the paper: the previous residual as extra context ----
 *
 * For a triple (a, b, c) the decoder of c | b may know z' = residual of
 * b | a. Measured (plug-in entropy, e_r always in the context):
 *   base : H(sym | e_r)                        (the paper's model)
 *   sign : H(sym | e_r, s') + H(lsb | e_r, b, s') over b >= 4
 *          where s' is zero / negative / positive and lsb is the sign of
 *          z (raw today), against 1 bit per such element
 *   b    : H(sym | e_r, b')
 *   both : H(sym | e_r, b', s') + H(lsb | e_r, b, s')
 *   sign_alone: the lsb modelled under (e_r, b) without s', to tell the
 *          previous residual's share from that of modelling the bit. */
static unsigned prev_sign(uint64_t z)
{
    return z == 0 ? 0 : (z & 1) ? 1 : 2;
}

static void study_previous(const tensor *t, const uint8_t *xa, const uint8_t *xb,
                           const uint8_t *xc, totals *acc)
{
    format f = format_of(t->dtype);
    if (f.width > 32)
        return;
    size_t n = (t->end - t->begin) / f.bytes, nb = f.width + 1, ns = f.n_sym;
    size_t rows = (size_t)f.n_ctx;
    uint64_t *base = calloc(rows * ns, 8), *sign = calloc(rows * 3 * ns, 8);
    uint64_t *bprev = calloc(rows * nb * ns, 8), *both = calloc(rows * nb * 3 * ns, 8);
    uint64_t *lsb_alone = calloc(rows * nb * 2, 8), *lsb = calloc(rows * nb * 3 * 2, 8);
    uint64_t n_lsb = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = load(xa + i * f.bytes, f.bytes), b = load(xb + i * f.bytes, f.bytes);
        uint64_t c = load(xc + i * f.bytes, f.bytes);
        uint64_t zp = tf_ulp_residual(b, a, f.width), z = tf_ulp_residual(c, b, f.width);
        unsigned n_raw, sym = tf_ulp_symbol(z, &n_raw), ctx = context_of(&f, b);
        unsigned sp = prev_sign(zp), bp = tf_ulp_bitlen(zp), bl = tf_ulp_bitlen(z);
        base[ctx * ns + sym]++;
        sign[(ctx * 3 + sp) * ns + sym]++;
        bprev[(ctx * nb + bp) * ns + sym]++;
        both[((ctx * nb + bp) * 3 + sp) * ns + sym]++;
        if (bl >= 4) {
            lsb_alone[(ctx * nb + bl) * 2 + (z & 1)]++;
            lsb[((ctx * nb + bl) * 3 + sp) * 2 + (z & 1)]++;
            n_lsb++;
        }
    }
    double lsb_bits = tf_rans_entropy_bits(lsb, rows * nb * 3, 2);
    acc->prev_elems += (double)n;
    acc->prev_base += tf_rans_entropy_bits(base, rows, ns) + (double)n_lsb;
    acc->prev_sign += tf_rans_entropy_bits(sign, rows * 3, ns) + lsb_bits;
    acc->prev_b += tf_rans_entropy_bits(bprev, rows * nb, ns) + (double)n_lsb;
    acc->prev_both += tf_rans_entropy_bits(both, rows * nb * 3, ns) + lsb_bits;
    acc->sign_alone +=
        tf_rans_entropy_bits(base, rows, ns) + tf_rans_entropy_bits(lsb_alone, rows * nb, 2);
    acc->cells_base += (double)occupied_cells(base, rows * ns);
    acc->cells_sign += (double)(occupied_cells(sign, rows * 3 * ns) +
                                occupied_cells(lsb, rows * nb * 3 * 2));
    acc->cells_b += (double)occupied_cells(bprev, rows * nb * ns);
    acc->cells_both += (double)(occupied_cells(both, rows * nb * 3 * ns) +
                                occupied_cells(lsb, rows * nb * 3 * 2));
    free(base);
    free(sign);
    free(bprev);
    free(both);
    free(lsb_alone);
    free(lsb);
}

/* ---- -s: precision and joint vs separate (b, q1, q2) ---- */

/* Bits to code counts with table t (cross-entropy against its
 * quantized frequencies), plus the table's serialized bytes. */
static void table_cost(const uint64_t *counts, unsigned n_ctx, unsigned n_sym, unsigned prec,
                       double *bits, double *table_bytes)
{
    tf_rans_table t;
    tf_error e;
    if (tf_rans_table_fit(&t, n_ctx, n_sym, prec, counts, &e) < 0)
        die("%s", e.msg);
    for (unsigned c = 0; c < n_ctx; c++)
        for (unsigned s = 0; s < n_sym; s++)
            if (counts[(size_t)c * n_sym + s])
                *bits += (double)counts[(size_t)c * n_sym + s] *
                         (prec - log2(tf_rans_table_freq(&t, c, s)));
    tf_buf b = { 0 };
    tf_rans_table_write(&t, &b, &e);
    *table_bytes += (double)b.len;
    tf_buf_free(&b);
    tf_rans_table_free(&t);
}

/* One symbol stream: its contexts, symbols and counts. */
typedef struct {
    unsigned n_ctx, n_sym;
    size_t n;
    uint16_t *ctx;
    uint8_t *sym;
    uint64_t *counts;
} stream;

static stream stream_make(unsigned n_ctx, unsigned n_sym, size_t cap)
{
    stream s = { .n_ctx = n_ctx, .n_sym = n_sym };
    s.ctx = malloc((cap + 1) * sizeof *s.ctx);
    s.sym = malloc(cap + 1);
    s.counts = calloc((size_t)n_ctx * n_sym, sizeof *s.counts);
    return s;
}

static void stream_add(stream *s, unsigned ctx, unsigned sym)
{
    s->ctx[s->n] = (uint16_t)ctx;
    s->sym[s->n++] = (uint8_t)sym;
    s->counts[(size_t)ctx * s->n_sym + sym]++;
}

static void stream_free(stream *s)
{
    free(s->ctx);
    free(s->sym);
    free(s->counts);
}

/* Seconds to decode s (best of 3) with the generic array decoder. */
static double time_generic_decode(const stream *s)
{
    tf_rans_table t;
    tf_rans_encoder enc;
    tf_rans_decoder dec;
    tf_error e;
    tf_buf b = { 0 };
    if (tf_rans_table_fit(&t, s->n_ctx, s->n_sym, 11, s->counts, &e) < 0 ||
        tf_rans_encoder_init(&enc, &t, &e) < 0 ||
        tf_rans_encode(&enc, s->ctx, s->sym, s->n, 16, &b, &e) < 0)
        die("%s", e.msg);
    uint8_t *got = malloc(s->n + 1);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        tf_cursor r = tf_cursor_make(b.data, b.len);
        if (tf_rans_decoder_init(&dec, &t, NULL, false, &e) < 0 ||
            tf_rans_decode(&dec, &r, s->ctx, got, s->n, &e) < 0)
            die("%s", e.msg);
        tf_rans_decoder_free(&dec);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    free(got);
    tf_buf_free(&b);
    tf_rans_encoder_free(&enc);
    tf_rans_table_free(&t);
    return best;
}

static void study_design(const tensor *t, const uint8_t *x, const uint8_t *r, totals *acc)
{
    format f = format_of(t->dtype);
    size_t n = (t->end - t->begin) / f.bytes;
    unsigned nb = f.width + 1;
    stream joint = stream_make(f.n_ctx, f.n_sym, n), bs = stream_make(f.n_ctx, nb, n);
    stream q1 = stream_make(f.n_ctx * nb, 2, n), q2 = stream_make(f.n_ctx * nb * 2, 2, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t rv = load(r + i * f.bytes, f.bytes);
        uint64_t z = tf_ulp_residual(load(x + i * f.bytes, f.bytes), rv, f.width);
        unsigned ctx = context_of(&f, rv), b = tf_ulp_bitlen(z), n_raw;
        stream_add(&joint, ctx, tf_ulp_symbol(z, &n_raw));
        stream_add(&bs, ctx, b);
        if (b >= 2)
            stream_add(&q1, ctx * nb + b, (unsigned)(z >> (b - 2)) & 1);
        if (b >= 3)
            stream_add(&q2, (ctx * nb + b) * 2 + ((z >> (b - 2)) & 1), (unsigned)(z >> (b - 3)) & 1);
    }
    for (unsigned prec = TF_RANS_MIN_PREC; prec <= TF_RANS_MAX_PREC; prec++)
        table_cost(joint.counts, joint.n_ctx, joint.n_sym, prec, &acc->prec_bits[prec],
                   &acc->prec_table[prec]);
    table_cost(joint.counts, joint.n_ctx, joint.n_sym, 11, &acc->joint_bits, &acc->joint_table);
    table_cost(bs.counts, bs.n_ctx, bs.n_sym, 11, &acc->sep_bits, &acc->sep_table);
    table_cost(q1.counts, q1.n_ctx, q1.n_sym, 11, &acc->sep_bits, &acc->sep_table);
    table_cost(q2.counts, q2.n_ctx, q2.n_sym, 11, &acc->sep_bits, &acc->sep_table);
    acc->dec_joint_s += time_generic_decode(&joint);
    acc->dec_sep_s += time_generic_decode(&bs) + time_generic_decode(&q1) +
                      time_generic_decode(&q2);
    stream_free(&joint);
    stream_free(&bs);
    stream_free(&q1);
    stream_free(&q2);
}

/* ---- zstd on the whole file ---- */

static void zstd_speed(const checkpoint *c, double *ratio, double *c_mbs, double *d_mbs)
{
    size_t cap = ZSTD_compressBound(c->len);
    uint8_t *z = malloc(cap), *back = malloc(c->len + 1);
    double best_c = 1e9, best_d = 1e9;
    size_t zlen = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        zlen = ZSTD_compress(z, cap, c->bytes, c->len, 3);
        double t1 = now();
        size_t got = ZSTD_decompress(back, c->len, z, zlen);
        double t2 = now();
        if (ZSTD_isError(zlen) || got != c->len)
            die("%s: zstd failed", c->path);
        best_c = t1 - t0 < best_c ? t1 - t0 : best_c;
        best_d = t2 - t1 < best_d ? t2 - t1 : best_d;
    }
    *ratio = (double)zlen / (double)c->len;
    *c_mbs = (double)c->len / best_c / 1e6;
    *d_mbs = (double)c->len / best_d / 1e6;
    free(z);
    free(back);
}

/* ---- driver ---- */

/* Every field of totals from model_bytes on is a double. */
static void add_totals(totals *into, const totals *t)
{
    const double *src = (const double *)((const char *)t + offsetof(totals, model_bytes));
    double *dst = (double *)((char *)into + offsetof(totals, model_bytes));
    for (size_t i = 0; i < (sizeof *t - offsetof(totals, model_bytes)) / sizeof(double); i++)
        dst[i] += src[i];
    into->elems += t->elems;
    into->tensors += t->tensors;
}

static void print_pair_line(const char *label, unsigned dtype, const totals *t)
{
    if (!t->elems)
        return;
    double n = (double)t->elems, bytes = n * tf_dtype_get(dtype)->size;
    double bpw = 8 * (t->model_bytes + t->chunk_bytes) / n;
    printf("%-44s %-4s %9.0f w  ulp %7.4f b/w (model %6.4f)  entropy %7.4f  ratio %.4f  "
           "enc %6.1f MB/s (fit+enc %6.1f)  dec %6.1f MB/s\n",
           label, tf_dtype_get(dtype)->name, n, bpw, 8 * t->model_bytes / n,
           t->entropy_bits / n, bpw / (8.0 * tf_dtype_get(dtype)->size),
           bytes / t->enc_s / 1e6, bytes / (t->fit_s + t->enc_s) / 1e6, bytes / t->dec_s / 1e6);
}

static void print_previous(unsigned dtype, const totals *t)
{
    if (!t->prev_base)
        return;
    /* the ulp output of the same (later) pairs, pro rata */
    double total = 8 * (t->model_bytes + t->chunk_bytes) * t->prev_elems / (double)t->elems;
    double bytes_per_cell = t->model_bytes * t->prev_elems / (double)t->elems /
                            (t->cells_base ? t->cells_base : 1);
    printf("\nprevious-residual context, %s, %.0f weights (plug-in bits saved, b/w, %% of ulp "
           "output; net = after tables at %.2f bytes per extra occupied cell):\n",
           tf_dtype_get(dtype)->name, t->prev_elems, bytes_per_cell);
    const char *names[] = { "lsb (sign) modelled under (e_r, b), no prev",
                            "sign of z | prev sign", "b,q1,q2 | prev b",
                            "both | prev b + prev sign" };
    double saved[] = { t->prev_base - t->sign_alone, t->prev_base - t->prev_sign,
                       t->prev_base - t->prev_b, t->prev_base - t->prev_both };
    double cells[] = { 0, t->cells_sign - t->cells_base, t->cells_b - t->cells_base,
                       t->cells_both - t->cells_base };
    for (int i = 0; i < 4; i++) {
        double net = saved[i] - 8 * bytes_per_cell * cells[i];
        printf("  %-46s %12.0f bits %7.4f b/w %6.3f%%   net %6.3f%%\n", names[i], saved[i],
               saved[i] / t->prev_elems, 100 * saved[i] / total, 100 * net / total);
    }
}

static void print_study(unsigned dtype, const totals *t)
{
    if (!t->joint_bits)
        return;
    double n = (double)t->elems;
    printf("\ndesign study, %s (%.0f weights):\n", tf_dtype_get(dtype)->name, n);
    for (unsigned p = TF_RANS_MIN_PREC; p <= TF_RANS_MAX_PREC; p++)
        printf("  prec %2u: coded %.5f b/w + tables %.5f b/w = %.5f b/w\n", p,
               t->prec_bits[p] / n, 8 * t->prec_table[p] / n,
               (t->prec_bits[p] + 8 * t->prec_table[p]) / n);
    printf("  joint (b,q1,q2)|e_r : coded %.5f b/w, tables %.0f bytes, generic rANS decode "
           "%.1f Msym/s\n", t->joint_bits / n, t->joint_table, n / t->dec_joint_s / 1e6);
    printf("  separate b|e_r, q1|b,e_r, q2|b,q1,e_r: coded %.5f b/w, tables %.0f bytes, "
           "three generic decodes %.1f Mweights/s\n", t->sep_bits / n, t->sep_table,
           n / t->dec_sep_s / 1e6);
}

int main(int argc, char **argv)
{
    size_t chunk_elems = (size_t)1 << 20;
    int opt;
    while ((opt = getopt(argc, argv, "c:r:s")) != -1) {
        if (opt == 'c')
            chunk_elems = (size_t)strtoull(optarg, NULL, 10);
        else if (opt == 'r')
            reps = atoi(optarg) > 0 ? atoi(optarg) : 1;
        else if (opt == 's')
            study = 1;
        else
            die("%s", "usage: ulp_measure [-c CHUNK_ELEMS] [-r REPS] [-s] FILE0 FILE1 [FILE2 ...]");
    }
    if (argc - optind < 2 || chunk_elems == 0)
        die("%s", "usage: ulp_measure [-c CHUNK_ELEMS] [-r REPS] [-s] FILE0 FILE1 [FILE2 ...]");
    checkpoint prev2 = { 0 }, prev, cur;
    load_checkpoint(argv[optind], &prev);
    for (int k = optind + 1; k < argc; k++) {
        load_checkpoint(argv[k], &cur);
        totals pair[TF_DT_COUNT] = { 0 };
        for (size_t i = 0; i < cur.n_tensors; i++) {
            const tensor *t = &cur.tensors[i];
            const tensor *ref = find_tensor(&prev, t);
            if (!ref || !tf_dtype_is_float(t->dtype))
                continue;
            const uint8_t *x = cur.data + t->begin, *r = prev.data + ref->begin;
            code_tensor(t, x, r, chunk_elems, &pair[t->dtype]);
            const tensor *ref2 = prev2.bytes ? find_tensor(&prev2, t) : NULL;
            if (ref2)
                study_previous(t, prev2.data + ref2->begin, r, x, &pair[t->dtype]);
            if (study)
                study_design(t, x, r, &pair[t->dtype]);
        }
        char label[300];
        const char *a = strrchr(prev.path, '/'), *b = strrchr(cur.path, '/');
        snprintf(label, sizeof label, "%s -> %s", a ? a + 1 : prev.path, b ? b + 1 : cur.path);
        for (unsigned d = 0; d < TF_DT_COUNT; d++) {
            print_pair_line(label, d, &pair[d]);
            add_totals(&by_dtype[d], &pair[d]);
        }
        double ratio, c_mbs, d_mbs;
        zstd_speed(&cur, &ratio, &c_mbs, &d_mbs);
        printf("%-44s zstd -3 whole file: ratio %.4f  comp %6.1f MB/s  decomp %6.1f MB/s\n",
               "", ratio, c_mbs, d_mbs);
        fflush(stdout);
        free(prev2.bytes);
        free(prev2.tensors);
        prev2 = prev;
        prev = cur;
    }
    printf("\n");
    for (unsigned d = 0; d < TF_DT_COUNT; d++)
        print_pair_line("TOTAL", d, &by_dtype[d]);
    printf("output digest %016llx\n", (unsigned long long)output_digest);
    for (unsigned d = 0; d < TF_DT_COUNT; d++) {
        print_previous(d, &by_dtype[d]);
        print_study(d, &by_dtype[d]);
    }
    free(prev2.bytes);
    free(prev2.tensors);
    free(prev.bytes);
    free(prev.tensors);
    return 0;
}
