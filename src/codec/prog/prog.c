/* The codec row of prog: fit, encode, decode, and the text form of a
 * model. */
#include "codec/prog/prog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_apply.h"
#include "codec/prog/prog_exec.h"
#include "codec/prog/prog_fields.h"
#include "codec/prog/prog_ops.h"
#include "codec/prog/prog_search.h"
#include "codec/prog/prog_serialize.h"
#include "codec/sample.h"
#include "common/dtype.h"

#define PROG_VERSION 1

/* Bytes per element (the word is 8 x that), or 0 for an unknown dtype or
 * a length that is not a whole number of elements. */
static unsigned element_bytes(unsigned dtype, size_t len)
{
    const tf_dtype_info *info = tf_dtype_get(dtype);
    return info && len % info->size == 0 ? info->size : 0;
}

static uint64_t *load_words(const uint8_t *src, size_t n, unsigned bytes)
{
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (v)
        tf_prog_words_load(src, n, bytes, v);
    return v;
}

static int search_words(const uint64_t *v, size_t n, unsigned width, unsigned dtype,
                        const tf_prog_fit_opts *opts, tf_prog_tree *best, tf_error *e)
{
    const tf_prog_prior *prior = opts ? opts->prior : NULL;
    tf_prog_search_opts so = {
        .budget = opts && opts->budget ? opts->budget
                  : prior             ? TF_PROG_DEFAULT_BUDGET
                                      : TF_PROG_UNIFORM_BUDGET,
        .prior = prior,
        .dtype = dtype,
        .max_memory = TF_PROG_SEARCH_MEMORY,
    };
    size_t size;
    return tf_prog_search(v, n, width, &so, best, &size, NULL, e);
}

/* What a cheap look at the sample finds that a search uses and fields do
 * not: the share of words equal to the one before (runs, constants) or a
 * step on from it by the step before (aranges), and how many distinct
 * words there are. */
typedef struct {
    double predicted; /* share of the sample's words */
    double distinct;
    size_t sampled;
} structure;

static structure look_at_sample(const uint8_t *src, size_t n, unsigned bytes)
{
    enum { SEEN_BITS = 1 << 14 };
    uint64_t seen[SEEN_BITS / 64] = { 0 };
    size_t predicted = 0;
    for (size_t k = 0; k < tf_sample_runs(n); k++) {
        const uint8_t *p = src + tf_sample_run_start(n, k) * bytes;
        uint64_t prev = 0, step = 0;
        for (size_t i = 0; i < tf_sample_run_len(n); i++) {
            uint64_t v = tf_le_get(p + i * bytes, bytes), d = v - prev;
            predicted += i >= 1 && (d == 0 || (i >= 2 && d == step));
            step = d;
            prev = v;
            uint64_t h = v * 0x9e3779b97f4a7c15u >> 50; /* 14 bits */
            seen[h / 64] |= (uint64_t)1 << (h % 64);
        }
    }
    structure st = { .sampled = tf_sample_len(n) };
    st.predicted = (double)predicted / (double)st.sampled;
    /* distinct words by linear counting of the bits set */
    size_t zero = 0;
    for (size_t i = 0; i < SEEN_BITS / 64; i++)
        zero += 64 - (size_t)__builtin_popcountll(seen[i]);
    st.distinct = zero ? -(double)SEEN_BITS * log((double)zero / SEEN_BITS) : (double)st.sampled;
    return st;
}

/* Whether a structure may pay for a search at all: a program then saves
 * an eighth of the estimate at least. */
static bool few_distinct(const structure *st)
{
    return st->distinct * 32 <= (double)st->sampled;
}

static bool may_pay(const structure *st)
{
    return st->predicted * 8 >= 1 || few_distinct(st);
}

/* The bytes a program could save over `plain`, the estimate without one,
 * for n words. */
static double structure_gain(const structure *st, size_t n, size_t plain)
{
    double gain = st->predicted * (double)plain;
    if (few_distinct(st)) {
        double coded = log2(st->distinct > 2 ? st->distinct : 2) * (double)n / 8;
        gain = (double)plain - coded > gain ? (double)plain - coded : gain;
    }
    return gain;
}

/* The sampled fit (tf_prog_fit_opts.sampled). */
static int fit_sampled(const uint8_t *src, size_t len, unsigned dtype,
                       const tf_prog_fit_opts *opts, tf_buf *model, tf_error *e);

int tf_prog_fit(const uint8_t *src, size_t len, unsigned dtype, const tf_prog_fit_opts *opts,
                tf_buf *model, tf_error *e)
{
    unsigned bytes = element_bytes(dtype, len);
    if (!bytes)
        return tf_fail(e, EINVAL, "prog: %zu bytes are not elements of dtype %u", len, dtype);
    if (opts && opts->sampled)
        return fit_sampled(src, len, dtype, opts, model, e);
    size_t n = len / bytes, sample = n < TF_PROG_SAMPLE_WORDS ? n : TF_PROG_SAMPLE_WORDS;
    uint64_t *v = load_words(src, sample, bytes);
    if (!v)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu words", sample);
    tf_prog_tree best;
    int rc = search_words(v, sample, 8 * bytes, dtype, opts, &best, e);
    free(v);
    if (rc < 0)
        return -1;
    if (tf_buf_u8(model, PROG_VERSION) < 0 || tf_buf_u8(model, (uint8_t)dtype) < 0)
        rc = tf_fail(e, ENOMEM, "prog: out of memory for a model");
    else
        rc = tf_prog_tree_write_template(&best, model, e);
    tf_prog_tree_release(&best, NULL);
    return rc;
}

static int fit_sampled(const uint8_t *src, size_t len, unsigned dtype,
                       const tf_prog_fit_opts *opts, tf_buf *model, tf_error *e)
{
    const unsigned bytes = tf_dtype_get(dtype)->size;
    const size_t n = len / bytes;
    tf_prog_fields f;
    bool fields = n > 0 && tf_prog_fields_choose(src, n, dtype, &f);
    structure st = n > 0 ? look_at_sample(src, n, bytes) : (structure){ 0 };
    /* the estimate (a pass over the sample) only where it can matter */
    size_t plain = !may_pay(&st) ? 0 : fields ? tf_prog_fields_estimate(src, n, &f) : len;
    double gain = may_pay(&st) ? structure_gain(&st, n, plain) : 0;
    if (gain >= TF_PROG_SEARCH_GAIN && gain * 8 >= (double)plain) {
        tf_prog_fit_opts searched = *opts;
        searched.sampled = false;
        return tf_prog_fit(src, len, dtype, &searched, model, e);
    }
    if (!fields)
        return tf_fail(e, EINVAL, "prog: no program pays for these %zu bytes", len);
    return tf_prog_fields_write_model(&f, model, e);
}

static int prog_fit(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
                    tf_error *e)
{
    return tf_prog_fit(src, len, ctx->dtype, ctx->fit_opts, model, e);
}

/* Parses a model for this dtype into a template. */
static int read_model(const uint8_t *model, size_t len, unsigned dtype, tf_prog *tmpl,
                      tf_error *e)
{
    tf_cursor r = tf_cursor_make(model, len);
    unsigned version = tf_read_u8(&r), model_dtype = tf_read_u8(&r);
    const tf_dtype_info *info = tf_dtype_get(model_dtype);
    if (r.bad || version != PROG_VERSION || !info)
        return tf_fail(e, EIO, "prog: not a version %d model", PROG_VERSION);
    if (dtype != model_dtype)
        return tf_fail(e, EINVAL, "prog: model for dtype %u used for dtype %u", model_dtype,
                       dtype);
    if (tf_prog_template_read(&r, 8 * info->size, tmpl, e) < 0)
        return -1;
    return tf_cursor_left(&r) ? tf_fail(e, EIO, "prog: model has trailing bytes") : 0;
}

/* Appends the version and the tree's instance. */
static int write_chunk(tf_prog_tree *tree, tf_buf *out, tf_error *e)
{
    if (tf_buf_u8(out, PROG_VERSION) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a chunk");
    return tf_prog_tree_write(tree, out, e);
}

/* The program the template makes of these words (the search's own, without
 * a template). */
static int synthesize(const tf_prog *tmpl, const uint64_t *v, size_t n, unsigned width,
                      unsigned dtype, tf_buf *out, tf_error *e)
{
    tf_prog_tree tree;
    int rc = tmpl ? tf_prog_apply(tmpl, v, n, width, dtype, &tree, e)
                  : search_words(v, n, width, dtype, NULL, &tree, e);
    if (rc < 0)
        return -1;
    rc = write_chunk(&tree, out, e);
    tf_prog_tree_release(&tree, NULL);
    return rc;
}

/* Whether the decoder accepts the chunk's program. */
static bool decodable(const uint8_t *chunk, size_t len, unsigned width, size_t n)
{
    tf_prog *p = malloc(sizeof *p);
    bool ok = p && tf_prog_read(chunk + 1, len - 1, width, n, p, NULL) == 0;
    free(p);
    return ok;
}

static int encode_words(const uint64_t *v, size_t n, unsigned width, const tf_codec_ctx *ctx,
                        tf_buf *out, tf_error *e)
{
    tf_prog *tmpl = NULL;
    if (ctx->model) {
        tmpl = malloc(sizeof *tmpl);
        if (!tmpl)
            return tf_fail(e, ENOMEM, "prog: out of memory for a model");
        if (read_model(ctx->model, ctx->model_len, ctx->dtype, tmpl, e) < 0) {
            free(tmpl);
            return -1;
        }
    }
    size_t start = out->len;
    int rc = synthesize(tmpl, v, n, width, ctx->dtype, out, e);
    /* The decoder's limits are global (the periods of all repeats); what
     * a search built node by node could exceed them. Then the chunk is one
     * literal, which always passes. */
    if (rc == 0 && !decodable(out->data + start, out->len - start, width, n)) {
        tf_prog literal = { .n_nodes = 1, .node[0] = { .op = TF_PROG_LIT, .width = (uint8_t)width } };
        out->len = start;
        rc = synthesize(&literal, v, n, width, ctx->dtype, out, e);
    }
    free(tmpl);
    return rc;
}

static bool is_fields_model(const tf_codec_ctx *ctx)
{
    return ctx->model && ctx->model_len && ctx->model[0] == TF_PROG_FIELDS_VERSION;
}

static int encode_fields(const uint8_t *src, size_t n, const tf_codec_ctx *ctx, tf_buf *out,
                         tf_error *e)
{
    tf_prog_fields f;
    if (tf_prog_fields_read_model(ctx->model, ctx->model_len, ctx->dtype, &f, e) < 0)
        return -1;
    if (tf_buf_u8(out, PROG_VERSION) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a chunk");
    return tf_prog_fields_encode(src, n, &f, out, e);
}

static size_t prog_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx)
{
    unsigned bytes = element_bytes(ctx->dtype, len);
    tf_prog_fields f;
    if (!bytes || !len || !is_fields_model(ctx) ||
        tf_prog_fields_read_model(ctx->model, ctx->model_len, ctx->dtype, &f, NULL) < 0)
        return SIZE_MAX;
    return 1 + tf_prog_fields_estimate(src, len / bytes, &f);
}

static int prog_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *out,
                       tf_error *e)
{
    unsigned bytes = element_bytes(ctx->dtype, len);
    if (!bytes)
        return tf_fail(e, EINVAL, "prog: %zu bytes are not elements of dtype %u", len,
                       ctx->dtype);
    size_t n = len / bytes, before = out->len;
    if (is_fields_model(ctx) && n > 0) {
        int rc = encode_fields(src, n, ctx, out, e);
        if (rc < 0)
            out->len = before;
        return rc;
    }
    uint64_t *v = load_words(src, n, bytes);
    if (!v)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu words", n);
    int rc = encode_words(v, n, 8 * bytes, ctx, out, e);
    free(v);
    if (rc < 0)
        out->len = before; /* nothing half-written is left behind */
    return rc;
}

static int prog_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                       uint8_t *dst, size_t len, tf_error *e)
{
    unsigned bytes = element_bytes(ctx->dtype, len);
    if (!bytes)
        return tf_fail(e, EIO, "prog: %zu bytes are not elements of dtype %u", len, ctx->dtype);
    if (enc_len < 1 || enc[0] != PROG_VERSION)
        return tf_fail(e, EIO, "prog: not a version %d chunk", PROG_VERSION);
    tf_prog p; /* 3 kB: a chunk's decoding allocates as little as it can */
    int rc = tf_prog_read(enc + 1, enc_len - 1, 8 * bytes, len / bytes, &p, e);
    return rc == 0 ? tf_prog_exec(&p, dst, e) : rc;
}

int tf_prog_describe(const uint8_t *model, size_t len, char *out, size_t outsz)
{
    tf_cursor r = tf_cursor_make(model, len);
    tf_read_u8(&r);
    unsigned dtype = tf_read_u8(&r);
    tf_prog *tmpl = malloc(sizeof *tmpl);
    if (!tmpl || r.bad || read_model(model, len, dtype, tmpl, NULL) < 0) {
        free(tmpl);
        return -1;
    }
    size_t n = tf_prog_describe_tree(tmpl, dtype, out, outsz);
    free(tmpl);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Opaque bytes get no program: a sampled fit has no fields for them. */
static bool fits_chunks_of(unsigned dtype)
{
    return dtype != TF_DT_NONE;
}

static int learn_prior(const tf_codec_tensor *tensors, size_t n, void **prior, tf_error *e)
{
    tf_prog_prior *p = NULL;
    int rc = tf_prog_prior_learn(tensors, n, &p, e);
    *prior = p;
    return rc;
}

static void free_prior(void *prior)
{
    tf_prog_prior_free(prior);
}

static const tf_codec_search search = {
    .head_elems = TF_PROG_SAMPLE_WORDS,
    .sample_max = TF_PROG_CALIBRATION_TENSORS,
    .pick = tf_prog_prior_pick,
    .learn = learn_prior,
    .prior_free = free_prior,
};

const tf_codec tf_codec_prog = {
    .id = TF_CODEC_PROG,
    .name = "prog",
    .delta = false,
    .needs_model = false, /* chunks decode without the template: it is not stored */
    .fit = prog_fit,
    .fits_chunks_of = fits_chunks_of,
    .search = &search,
    .estimate = prog_estimate,
    .encode = prog_encode,
    .decode = prog_decode,
};

int tf_prog_describe_chunk(const uint8_t *enc, size_t len, unsigned dtype, size_t raw_len,
                           char *out, size_t outsz)
{
    unsigned bytes = element_bytes(dtype, raw_len);
    tf_prog *p = malloc(sizeof *p);
    bool ok = bytes && p && len >= 1 && enc[0] == PROG_VERSION &&
              tf_prog_read(enc + 1, len - 1, 8 * bytes, raw_len / bytes, p, NULL) == 0;
    /* An instance keeps each literal's coding in its body: opening the
     * body (with the earlier siblings of a merge as possible context
     * sources, as the executor does) names it. */
    for (unsigned i = 0; ok && i < p->n_nodes; i++) {
        tf_prog_node *k = &p->node[i];
        if (k->op != TF_PROG_LIT)
            continue;
        tf_prog_lit_reader r;
        ok = tf_prog_lit_open_node(&r, p, i, NULL) == 0;
        k->lit = (tf_prog_lit_hint){ .coding = r.coding, .ctx_sibling = (uint8_t)r.ctx_sibling,
                                     .ctx_self = r.ctx_self };
        tf_prog_lit_close(&r);
    }
    size_t n = ok ? tf_prog_describe_tree(p, dtype, out, outsz) : 0;
    free(p);
    return !ok ? -1 : n > INT32_MAX ? INT32_MAX : (int)n;
}
