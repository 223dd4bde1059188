/* Literal leaves in static rANS (rans.h), optionally under contexts taken
 * from an earlier sibling of the parent merge (e.g. the mantissa under the
 * exponent). Variants (precision, context source and window) are ranked
 * by a close estimate, and the few near the best are encoded to get exact
 * sizes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog_leaf_codings.h"

/* Streams this long get 16 lanes (faster to decode); shorter ones 1:
 * the 15 more lane states (60 bytes) cost about 1% of a stream of 16384
 * symbols of 3 bits, and more below. */
#define LANES_FROM 16384
/* Context windows tried: how many source values get contexts of their
 * own (the rest share context 0). Rows cost table bytes; which number
 * pays depends on the chunk (on prog_bench's files, offering the small
 * windows too saved 0.2% over a window of 32 alone). */
static const unsigned windows[] = { 2, 4, 8, 16, 32 };
/* Sources wider than this are not histogrammed for a window. */
#define MAX_SOURCE_WIDTH 16
/* Candidates whose estimate is within this many bytes of the best are
 * encoded to find the exact smallest. */
#define EXACT_SLACK 8

/* Table precisions tried: lower ones make smaller tables (8 never won
 * on prog_bench's files). */
static const unsigned precisions[] = { 9, 10, 11 };

static unsigned lanes_for(size_t n)
{
    return n >= LANES_FROM ? 16 : 1;
}

static inline unsigned ctx_of(uint64_t v, uint64_t base, unsigned count)
{
    uint64_t d = v - base;
    return d < count ? (unsigned)d + 1 : 0;
}

/* The window of at most `max` consecutive source values holding the most
 * words (the first such), trimmed to values that occur. */
static int best_window(const tf_prog_ctx_source *src, size_t n, unsigned max, uint64_t *base,
                       unsigned *count)
{
    size_t span = (size_t)1 << src->width;
    uint32_t *hist = calloc(span, sizeof *hist);
    if (!hist)
        return -1;
    for (size_t i = 0; i < n; i++)
        hist[src->v[i]]++;
    size_t w = span < max ? span : max, best = 0;
    uint64_t mass = 0, best_mass = 0;
    for (size_t v = 0; v < span; v++) {
        mass += hist[v];
        if (v >= w)
            mass -= hist[v - w];
        if (v + 1 >= w && mass > best_mass) {
            best_mass = mass;
            best = v + 1 - w;
        }
    }
    size_t lo = best, hi = best + w;
    while (lo < hi && !hist[lo])
        lo++;
    while (hi > lo && !hist[hi - 1])
        hi--;
    free(hist);
    *base = lo;
    *count = (unsigned)(hi > lo ? hi - lo : 1);
    return 0;
}

/* Context of every symbol under a plan (NULL when it has no source). */
static uint16_t *contexts(const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                          size_t n, bool *oom)
{
    *oom = false;
    if (!plan->ctx_sibling)
        return NULL;
    uint16_t *ctx = malloc(n * sizeof *ctx);
    if (!ctx) {
        *oom = true;
        return NULL;
    }
    const uint64_t *v = sources[plan->ctx_sibling - 1].v;
    for (size_t i = 0; i < n; i++)
        ctx[i] = (uint16_t)ctx_of(v[i], plan->ctx_base, plan->ctx_count);
    return ctx;
}

static unsigned n_contexts(const tf_prog_lit_plan *plan)
{
    return plan->ctx_sibling ? plan->ctx_count + 1u : 1u;
}

/* counts[ctx * n_sym + sym] of the plan's contexts; NULL when out of
 * memory. */
static uint64_t *count_pairs(const uint8_t *sym, const uint16_t *ctx, size_t n, unsigned n_sym,
                             const tf_prog_lit_plan *plan)
{
    uint64_t *counts = calloc((size_t)n_contexts(plan) * n_sym, sizeof *counts);
    if (counts)
        for (size_t i = 0; i < n; i++)
            counts[(size_t)(ctx ? ctx[i] : 0) * n_sym + sym[i]]++;
    return counts;
}

static int fit_table(const uint8_t *sym, const uint16_t *ctx, size_t n, unsigned n_sym,
                     const tf_prog_lit_plan *plan, tf_rans_table *t, uint64_t **counts_out,
                     tf_error *e)
{
    uint64_t *counts = count_pairs(sym, ctx, n, n_sym, plan);
    if (!counts)
        return tf_fail(e, ENOMEM, "prog: out of memory for rANS counts");
    int rc = tf_rans_table_fit(t, n_contexts(plan), n_sym, plan->prec, counts, e);
    if (rc == 0 && counts_out)
        *counts_out = counts;
    else
        free(counts);
    return rc;
}

/* The body after its coding byte, up to the stream: source, n_sym,
 * table. */
static int write_head(unsigned n_sym, const tf_prog_lit_plan *plan, const tf_rans_table *t,
                      tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, plan->ctx_sibling);
    if (plan->ctx_sibling)
        rc |= tf_buf_varint(out, plan->ctx_base) | tf_buf_u8(out, plan->ctx_count);
    rc |= tf_buf_varint(out, n_sym);
    if (rc)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    return tf_rans_table_write(t, out, e);
}

static int write_body(const uint8_t *sym, const uint16_t *ctx, size_t n, unsigned n_sym,
                      const tf_prog_lit_plan *plan, const tf_rans_table *t, tf_buf *out,
                      tf_error *e)
{
    tf_rans_encoder enc;
    if (write_head(n_sym, plan, t, out, e) < 0 || tf_rans_encoder_init(&enc, t, e) < 0)
        return -1;
    int rc = tf_rans_encode(&enc, ctx, sym, n, lanes_for(n), out, e);
    tf_rans_encoder_free(&enc);
    return rc;
}

int tf_prog_rans_write(const uint8_t *sym, size_t n, unsigned n_sym,
                       const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                       tf_buf *out, tf_error *e)
{
    bool oom;
    uint16_t *ctx = contexts(sources, plan, n, &oom);
    if (oom)
        return tf_fail(e, ENOMEM, "prog: out of memory for contexts");
    tf_rans_table t;
    int rc = fit_table(sym, ctx, n, n_sym, plan, &t, NULL, e);
    if (rc == 0) {
        rc = write_body(sym, ctx, n, n_sym, plan, &t, out, e);
        tf_rans_table_free(&t);
    }
    free(ctx);
    return rc;
}

/* Estimated body size: exact but for the stream's payload, which is taken
 * as the ideal code length of the symbols under the table. */
static int estimate(const uint8_t *sym, const uint16_t *ctx, size_t n, unsigned n_sym,
                    const tf_prog_lit_plan *plan, size_t *size, tf_error *e)
{
    tf_rans_table t;
    uint64_t *counts;
    if (fit_table(sym, ctx, n, n_sym, plan, &t, &counts, e) < 0)
        return -1;
    unsigned n_ctx = n_contexts(plan);
    tf_buf head = { 0 };
    int rc = -1;
    if (tf_buf_u8(&head, plan->coding) < 0) {
        tf_fail(e, ENOMEM, "prog: out of memory estimating a literal");
        goto done;
    }
    double bits = 0;
    for (unsigned c = 0; c < n_ctx; c++)
        for (unsigned s = 0; s < n_sym; s++) {
            uint64_t k = counts[(size_t)c * n_sym + s];
            if (k)
                bits += (double)k * (plan->prec - log2(tf_rans_table_freq(&t, c, s)));
        }
    /* The stream: varint length | u8 lanes | lane states | u16 words. */
    size_t stream = 1 + 4 * (size_t)lanes_for(n) + 2 * (size_t)((bits + 15) / 16);
    if (write_head(n_sym, plan, &t, &head, e) < 0 || tf_buf_varint(&head, stream) < 0)
        goto done;
    *size = head.len + stream;
    rc = 0;
done:
    free(counts);
    tf_buf_free(&head);
    tf_rans_table_free(&t);
    return rc;
}

static int exact_size(const uint8_t *sym, size_t n, unsigned n_sym,
                      const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                      size_t *size, tf_error *e)
{
    tf_buf body = { 0 };
    int rc = tf_buf_u8(&body, plan->coding) < 0
                 ? tf_fail(e, ENOMEM, "prog: out of memory for a literal")
                 : tf_prog_rans_write(sym, n, n_sym, sources, plan, &body, e);
    *size = body.len;
    tf_buf_free(&body);
    return rc;
}

#define N_PRECISIONS (sizeof precisions / sizeof precisions[0])
#define N_WINDOWS (sizeof windows / sizeof windows[0])
#define MAX_VARIANTS (N_PRECISIONS * (1 + N_WINDOWS * TF_PROG_MAX_ARITY))

typedef struct {
    tf_prog_lit_plan plan;
    size_t estimate;
} variant;

/* The variants of one context setting (base), one per precision. */
static int add_variants(const uint8_t *sym, size_t n, unsigned n_sym,
                        const tf_prog_ctx_source *sources, const tf_prog_lit_plan *base,
                        variant *vars, unsigned *n_vars, tf_error *e)
{
    bool oom;
    uint16_t *ctx = contexts(sources, base, n, &oom);
    if (oom)
        return tf_fail(e, ENOMEM, "prog: out of memory for contexts");
    int rc = 0;
    for (size_t p = 0; p < N_PRECISIONS && rc == 0; p++) {
        variant *v = &vars[(*n_vars)++];
        v->plan = *base;
        v->plan.prec = (uint8_t)precisions[p];
        rc = estimate(sym, ctx, n, n_sym, &v->plan, &v->estimate, e);
    }
    free(ctx);
    return rc;
}

/* Every (context source and window, precision) variant with its
 * estimate. */
static int list_variants(const uint8_t *sym, size_t n, unsigned n_sym,
                         const tf_prog_ctx_source *sources, unsigned n_src, variant *vars,
                         unsigned *n_vars, tf_error *e)
{
    *n_vars = 0;
    tf_prog_lit_plan base = { .coding = TF_PROG_CODE_RANS };
    if (add_variants(sym, n, n_sym, sources, &base, vars, n_vars, e) < 0)
        return -1;
    for (unsigned j = 1; j <= n_src; j++) {
        const tf_prog_ctx_source *src = &sources[j - 1];
        if (!src->v || src->width > MAX_SOURCE_WIDTH)
            continue;
        unsigned last = 0;
        for (size_t w = 0; w < N_WINDOWS; w++) {
            unsigned count;
            if (best_window(src, n, windows[w], &base.ctx_base, &count) < 0)
                return tf_fail(e, ENOMEM, "prog: out of memory for a context window");
            if (count < 2 || count == last)
                continue; /* one context is no context; a window seen */
            last = count;
            base.ctx_sibling = (uint8_t)j;
            base.ctx_count = (uint8_t)count;
            if (add_variants(sym, n, n_sym, sources, &base, vars, n_vars, e) < 0)
                return -1;
        }
    }
    return 0;
}

int tf_prog_rans_plan(const uint8_t *sym, size_t n, unsigned n_sym,
                      const tf_prog_ctx_source *sources, unsigned n_src, tf_prog_lit_plan *plan,
                      tf_error *e)
{
    variant vars[MAX_VARIANTS];
    unsigned n_vars;
    if (n_src > TF_PROG_MAX_ARITY)
        n_src = TF_PROG_MAX_ARITY;
    if (list_variants(sym, n, n_sym, sources, n_src, vars, &n_vars, e) < 0)
        return -1;
    size_t best_estimate = SIZE_MAX;
    for (unsigned i = 0; i < n_vars; i++)
        best_estimate = vars[i].estimate < best_estimate ? vars[i].estimate : best_estimate;
    plan->size = SIZE_MAX;
    for (unsigned i = 0; i < n_vars; i++) {
        if (vars[i].estimate > best_estimate + EXACT_SLACK)
            continue;
        size_t size;
        if (exact_size(sym, n, n_sym, sources, &vars[i].plan, &size, e) < 0)
            return -1;
        if (size < plan->size) {
            *plan = vars[i].plan;
            plan->size = size;
        }
    }
    return 0;
}

/* ---- decoding ---- */

/* A row of zero slots stands in for a context the table has no row for:
 * decoding through it is harmless, and the decoder notes that it did. */
static const uint32_t no_row[1u << TF_RANS_MAX_PREC];

static void index_rows(tf_prog_lit_reader *r, unsigned n_ctx)
{
    bool by_word = r->ctx_sibling && r->source_width <= 8;
    unsigned n_index = by_word ? 1u << r->source_width : n_ctx;
    for (unsigned i = 0; i < n_index; i++) {
        unsigned c = by_word ? ctx_of(i, r->ctx_base, r->ctx_count) : i;
        const uint32_t *row = tf_rans_slots(&r->dec, c);
        r->slots[i] = row ? row : no_row;
    }
}

int tf_prog_rans_open(tf_prog_lit_reader *r, tf_reader *in, const tf_prog_siblings *siblings,
                      tf_error *e)
{
    r->ctx_sibling = tf_read_u8(in);
    if (r->ctx_sibling) {
        r->ctx_base = tf_read_varint(in);
        r->ctx_count = tf_read_u8(in);
        if (in->bad || !siblings || r->ctx_sibling > siblings->count || r->ctx_count == 0)
            return tf_fail(e, EIO, "prog: rANS literal has an invalid context source");
        r->source_width = siblings->width[r->ctx_sibling - 1];
    }
    uint64_t n_sym = tf_read_varint(in);
    uint64_t max_sym = r->width >= 8 ? 256 : (uint64_t)1 << r->width;
    if (in->bad || n_sym == 0 || n_sym > max_sym)
        return tf_fail(e, EIO, "prog: rANS literal of %llu symbols in %u bits",
                       (unsigned long long)n_sym, r->width);
    unsigned n_ctx = r->ctx_sibling ? r->ctx_count + 1u : 1u;
    if (tf_rans_table_read(&r->table, in, n_ctx, (unsigned)n_sym, e) < 0)
        return -1;
    if (tf_rans_decoder_init(&r->dec, &r->table, NULL, false, e) < 0 ||
        tf_rans_stream_open(&r->stream, in, e) < 0)
        return -1;
    if (tf_reader_left(in))
        return tf_fail(e, EIO, "prog: rANS literal has trailing bytes");
    index_rows(r, n_ctx);
    return 0;
}

/* Decodes count symbols; symbol i under the slot row rows(i). Whole
 * rounds of 16 lanes go without bounds checks while the words last; the
 * rest (a stream of fewer lanes, its start and end) with checks. Lane
 * counts are powers of two. A symbol under no_row marks the literal
 * bad. */
#define DECODE_SYMBOLS(rows)                                                          \
    do {                                                                              \
        const unsigned prec = r->table.prec, mask = s->lanes - 1;                     \
        bool missing = false;                                                         \
        size_t i = 0;                                                                 \
        for (; i < count && ((r->done + i) & mask); i++) {                            \
            const uint32_t *row = rows(i);                                            \
            missing |= row == no_row;                                                 \
            out[i] = tf_rans_get_checked(s, (unsigned)((r->done + i) & mask), row, prec); \
        }                                                                             \
        if (s->lanes == 16)                                                           \
            for (; i + 16 <= count && tf_rans_words_suffice(s, 16); i += 16) {        \
                _Pragma("GCC unroll 16") for (unsigned l = 0; l < 16; l++) {          \
                    const uint32_t *row = rows(i + l);                                \
                    missing |= row == no_row;                                         \
                    out[i + l] = tf_rans_get_fast(s, l, row, prec);                   \
                }                                                                     \
            }                                                                         \
        for (; i < count; i++) {                                                      \
            const uint32_t *row = rows(i);                                            \
            missing |= row == no_row;                                                 \
            out[i] = tf_rans_get_checked(s, (unsigned)((r->done + i) & mask), row, prec); \
        }                                                                             \
        r->bad |= missing;                                                            \
    } while (0)

static void read_one_row(tf_prog_lit_reader *r, tf_rans_stream *s, uint64_t *out, size_t count)
{
    const uint32_t *slots = r->slots[0];
#define ONE_ROW(i) slots
    DECODE_SYMBOLS(ONE_ROW);
#undef ONE_ROW
}

static void read_with_contexts(tf_prog_lit_reader *r, tf_rans_stream *s, uint64_t *out,
                               size_t count, const uint64_t *ctx_words)
{
    const uint32_t *const *slots = r->slots;
    if (r->source_width <= 8) { /* rows by source word */
#define BY_WORD(i) slots[ctx_words[i]]
        DECODE_SYMBOLS(BY_WORD);
#undef BY_WORD
    } else {
        const uint64_t base = r->ctx_base;
        const unsigned n = r->ctx_count;
#define BY_CONTEXT(i) slots[ctx_of(ctx_words[i], base, n)]
        DECODE_SYMBOLS(BY_CONTEXT);
#undef BY_CONTEXT
    }
}

void tf_prog_rans_read(tf_prog_lit_reader *r, uint64_t *out, size_t count,
                       const uint64_t *ctx_words)
{
    tf_rans_stream s = r->stream; /* a local copy stays in registers */
    if (r->ctx_sibling)
        read_with_contexts(r, &s, out, count, ctx_words);
    else
        read_one_row(r, &s, out, count);
    r->stream = s;
    r->bad |= s.bad;
}
