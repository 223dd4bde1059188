#include "codec/ulp/ulp_stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "codec/entropy/rans.h"
#include "codec/ulp/ulp.h"
#include "codec/ulp/ulp_format.h"
#include "common/buf.h"
#include "common/dtype.h"

#define ULP_STATS_INLINE static inline __attribute__((always_inline))

double tf_ulp_bits_total(const tf_ulp_bits *x)
{
    return x->b + x->q1 + x->q2 + (double)x->raw + (double)x->framing + (double)x->tables;
}

void tf_ulp_bits_add(tf_ulp_bits *sum, const tf_ulp_bits *x)
{
    sum->weights += x->weights;
    sum->b += x->b;
    sum->q1 += x->q1;
    sum->q2 += x->q2;
    sum->raw += x->raw;
    sum->framing += x->framing;
    sum->tables += x->tables;
}

/* ---- the paper's stages of a joint symbol ---- */

/* A symbol (ulp.h) is z itself when b <= 2, else 4 (b - 2) + 2 q1 + q2.
 * The symbols of one b, or of one (b, q1), are a group named by its
 * first symbol. */
static unsigned length_group(unsigned sym)
{
    return sym < 2 ? sym : sym < 4 ? 2 : sym & ~3u;
}

static unsigned refinement_group(unsigned sym)
{
    return sym < 4 ? sym : sym & ~1u;
}

typedef struct {
    double b, q1, q2;
} stage_bits;

/* The code length of each symbol under the distribution w / sum(w) (w:
 * counts, or a table's frequencies), by stage: -log2 P(b),
 * -log2 P(q1 | b) and -log2 P(q2 | b, q1). 0 for symbols without weight. */
static void stage_lengths(const double *w, unsigned n_sym, stage_bits *len)
{
    double of_length[TF_RANS_MAX_SYMBOLS] = { 0 }, of_refinement[TF_RANS_MAX_SYMBOLS] = { 0 };
    double total = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        of_length[length_group(s)] += w[s];
        of_refinement[refinement_group(s)] += w[s];
        total += w[s];
    }
    for (unsigned s = 0; s < n_sym; s++) {
        double pl = of_length[length_group(s)], pr = of_refinement[refinement_group(s)];
        len[s] = w[s] > 0 ? (stage_bits){ log2(total / pl), log2(pl / pr), log2(pr / w[s]) }
                          : (stage_bits){ 0, 0, 0 };
    }
}

/* Adds the code lengths of counts[s] symbols s under weights w. */
static void add_row_bits(const uint64_t *counts, const double *w, unsigned n_sym,
                         tf_ulp_bits *out)
{
    stage_bits len[TF_RANS_MAX_SYMBOLS];
    stage_lengths(w, n_sym, len);
    for (unsigned s = 0; s < n_sym; s++) {
        double n = (double)counts[s];
        out->b += n * len[s].b;
        out->q1 += n * len[s].q1;
        out->q2 += n * len[s].q2;
    }
}

static const uint64_t *hist_row(const tf_ulp_hist *h, unsigned ctx)
{
    return h->counts + (size_t)ctx * h->n_sym;
}

static bool row_is_empty(const uint64_t *row, unsigned n_sym)
{
    for (unsigned s = 0; s < n_sym; s++)
        if (row[s])
            return false;
    return true;
}

/* ---- histogram ---- */

int tf_ulp_hist_init(tf_ulp_hist *h, unsigned dtype, tf_error *e)
{
    *h = (tf_ulp_hist){ .dtype = dtype };
    if (!tf_dtype_is_float(dtype))
        return tf_fail(e, EINVAL, "ulp stats: dtype %u is not a float", dtype);
    const tf_dtype_info *info = tf_dtype_get(dtype);
    h->bytes = info->size;
    h->n_ctx = 1u << info->exp_bits;
    h->n_sym = tf_ulp_symbol_count(8 * info->size);
    h->counts = calloc((size_t)h->n_ctx * h->n_sym, sizeof *h->counts);
    if (!h->counts)
        return tf_fail(e, ENOMEM, "ulp stats: out of memory for counts");
    return 0;
}

void tf_ulp_hist_clear(tf_ulp_hist *h)
{
    for (size_t i = 0; i < (size_t)h->n_ctx * h->n_sym; i++)
        h->counts[i] = 0;
    h->weights = h->raw_bits = 0;
}

void tf_ulp_hist_free(tf_ulp_hist *h)
{
    free(h->counts);
    h->counts = NULL;
}

ULP_STATS_INLINE void hist_add_sized(tf_ulp_hist *h, const uint8_t *src, const uint8_t *ref,
                                     size_t n, unsigned bytes)
{
    const tf_dtype_info *info = tf_dtype_get(h->dtype);
    const unsigned man = info->man_bits, ctx_mask = h->n_ctx - 1, n_sym = h->n_sym;
    uint64_t raw_bits = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tf_le_get(ref + i * bytes, bytes);
        uint64_t z = tf_ulp_residual(tf_le_get(src + i * bytes, bytes), r, 8 * bytes);
        unsigned n_raw, sym = tf_ulp_symbol(z, &n_raw);
        h->counts[(size_t)((unsigned)(r >> man) & ctx_mask) * n_sym + sym]++;
        raw_bits += n_raw;
    }
    h->weights += n;
    h->raw_bits += raw_bits;
}

void tf_ulp_hist_add(tf_ulp_hist *h, const uint8_t *src, const uint8_t *ref, size_t n)
{
    switch (h->bytes) {
    case 1: hist_add_sized(h, src, ref, n, 1); break;
    case 2: hist_add_sized(h, src, ref, n, 2); break;
    case 4: hist_add_sized(h, src, ref, n, 4); break;
    default: hist_add_sized(h, src, ref, n, 8); break;
    }
}

/* Adds the ideal code lengths of the counted symbols under table t's
 * frequencies, or with t NULL under the counts themselves (the entropy). */
static void add_ideal_bits(const tf_ulp_hist *h, const tf_rans_table *t, tf_ulp_bits *out)
{
    double w[TF_RANS_MAX_SYMBOLS];
    for (unsigned c = 0; c < h->n_ctx; c++) {
        const uint64_t *row = hist_row(h, c);
        if (row_is_empty(row, h->n_sym))
            continue;
        for (unsigned s = 0; s < h->n_sym; s++)
            w[s] = t ? tf_rans_table_freq(t, c, s) : (double)row[s];
        add_row_bits(row, w, h->n_sym, out);
    }
}

void tf_ulp_hist_entropy(const tf_ulp_hist *h, tf_ulp_bits *out)
{
    add_ideal_bits(h, NULL, out);
    out->weights += h->weights;
    out->raw += h->raw_bits;
}

double tf_ulp_hist_entropy_without_context(const tf_ulp_hist *h)
{
    uint64_t pooled[TF_RANS_MAX_SYMBOLS] = { 0 };
    for (unsigned c = 0; c < h->n_ctx; c++) {
        const uint64_t *row = hist_row(h, c);
        for (unsigned s = 0; s < h->n_sym; s++)
            pooled[s] += row[s];
    }
    /* a histogram of one context, which all the counts share */
    const tf_ulp_hist one = { .n_ctx = 1, .n_sym = h->n_sym, .counts = pooled };
    tf_ulp_bits bits = { 0 };
    add_ideal_bits(&one, NULL, &bits);
    return bits.b + bits.q1 + bits.q2;
}

/* ---- breakdown of a stored chunk ---- */

/* Bytes of the chunk's rANS streams (ulp.h: one, or two for a large
 * chunk of a version 2 model) that the coder wrote: lane states and
 * words, without each stream's length and lane count. */
static int coded_stream_bytes(const uint8_t *enc, size_t enc_len, unsigned streams,
                              size_t *coded, tf_error *e)
{
    tf_cursor r = tf_cursor_make(enc, enc_len);
    *coded = 0;
    for (unsigned k = 0; k < streams; k++) {
        tf_rans_stream s;
        if (tf_rans_stream_open(&s, &r, e) < 0)
            return -1;
        *coded += 4 * (size_t)s.lanes + (size_t)(s.end - s.p);
    }
    return 0;
}

/* Shares the stream's bits out in proportion to the ideal lengths. */
static void scale_to_stream(tf_ulp_bits *x, double stream_bits)
{
    double ideal = x->b + x->q1 + x->q2;
    if (ideal <= 0) { /* only certain symbols: whatever was written is b's */
        *x = (tf_ulp_bits){ .weights = x->weights, .b = stream_bits, .raw = x->raw };
        return;
    }
    double f = stream_bits / ideal;
    x->b *= f;
    x->q1 *= f;
    x->q2 *= f;
}

/* Breaks a decoded chunk down, its symbols counted in h. */
static int account_chunk(const uint8_t *enc, size_t enc_len, unsigned streams,
                         const tf_ulp_hist *h, const tf_rans_table *t, tf_ulp_bits *out,
                         tf_error *e)
{
    size_t coded;
    if (coded_stream_bytes(enc, enc_len, streams, &coded, e) < 0)
        return -1;
    tf_ulp_bits chunk = { .weights = h->weights, .raw = h->raw_bits };
    add_ideal_bits(h, t, &chunk);
    scale_to_stream(&chunk, 8.0 * (double)coded);
    /* Decoding checked that the raw bits end in the last byte. */
    chunk.framing = 8 * ((uint64_t)enc_len - coded) - h->raw_bits;
    tf_ulp_bits_add(out, &chunk);
    return 0;
}

int tf_ulp_breakdown(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx, size_t len,
                     tf_ulp_bits *out, tf_error *e)
{
    uint8_t *decoded = malloc(len ? len : 1);
    tf_rans_table t = { 0 };
    tf_ulp_hist h = { 0 };
    ulp_format f;
    int rc = -1;
    if (!decoded) {
        tf_fail(e, ENOMEM, "ulp stats: out of memory decoding %zu bytes", len);
        goto done;
    }
    /* The symbols are those of the decoded residuals: decoding checks
     * the whole chunk, and the codec's own loop is the only decoder. */
    if (tf_codec_ulp.decode(enc, enc_len, ctx, decoded, len, e) < 0 ||
        tf_ulp_format_and_model(ctx, len, &f, &t, e) < 0 || tf_ulp_hist_init(&h, ctx->dtype, e) < 0)
        goto done;
    tf_ulp_hist_add(&h, decoded, ctx->ref, len / h.bytes);
    rc = account_chunk(enc, enc_len, streams_of_chunk(&f, len / f.bytes), &h, &t, out, e);
done:
    tf_ulp_hist_free(&h);
    tf_rans_table_free(&t);
    free(decoded);
    return rc;
}
