/* Literal leaves in static rANS (rans.h), optionally under contexts taken
 * from an earlier sibling of the parent merge (e.g. the mantissa under the
 * exponent) or from the literal's own words a turn earlier (an exponent
 * under a nearby one: neighbouring weights share a scale). Variants
 * (precision, context source and window) are ranked by a close estimate,
 * and the few near the best are encoded to get exact sizes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_leaf_codings.h"

/* Streams this long get 16 lanes (faster to decode): the 15 more lane
 * states (60 bytes) cost about 1% of a stream of 16384 symbols of 3
 * bits, and more below. Shorter ones down to SOME_LANES_FROM get 4
 * lanes, which decode about as many times faster as a single lane (its
 * steps are one dependency chain) for 12 bytes; the shortest, 1. */
#define LANES_FROM 16384
#define SOME_LANES_FROM 1024
/* Context windows tried: how many source values get contexts of their
 * own (the rest share context 0). Rows cost table bytes; which number
 * pays depends on the chunk (on prog_bench's files, offering the small
 * windows too saved 0.2% over a window of 32 alone). */
static const unsigned windows[] = { 2, 4, 8, 16, 32 };
/* Sources wider than this are not histogrammed for a window. */
#define MAX_SOURCE_WIDTH 16
/* A decoder refuses wider windows: its dense slots take 2^prec x 4 bytes
 * a context (present or not), which a hostile table would not pay for. */
#define MAX_WINDOW 64
/* Candidates whose estimate is within this many bytes of the best are
 * encoded to find the exact smallest. */
#define EXACT_SLACK 8

/* Table precisions tried: lower ones make smaller tables (8 never won
 * on prog_bench's files). */
static const unsigned precisions[] = { 9, 10, 11 };

/* Streams this long are split in two streams of 16 lanes that take
 * turns by rounds of 16 symbols: decoding overlaps the two (the
 * dependency chains of one stream leave a decoder waiting, on a Zen 4
 * most of the time). The second stream's head (66 bytes) costs at most
 * about 0.2% of a stream of 2^17 symbols of 2 bits. */
#define SPLIT_FROM 131072

static unsigned lanes_for(size_t n)
{
    return n >= LANES_FROM ? 16 : n >= SOME_LANES_FROM ? 4 : 1;
}

static unsigned streams_for(uint64_t n)
{
    return n >= SPLIT_FROM ? 2 : 1;
}

/* A literal under its own words takes the context of word i from word
 * i - lag, a turn of its streams earlier: decoding a turn needs only the
 * one before (prog_leaf.h). */
static unsigned self_lag(unsigned streams, unsigned lanes)
{
    return streams * lanes;
}

static inline unsigned ctx_of(uint64_t v, uint64_t base, unsigned count)
{
    uint64_t d = v - base;
    return d < count ? (unsigned)d + 1 : 0;
}

/* The window of at most `max` consecutive source values holding the most
 * words (the first such) by the histogram hist[0..span), trimmed to values
 * that occur. */
static void best_window(const uint32_t *hist, size_t span, unsigned max, uint64_t *base,
                        unsigned *count)
{
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
    *base = lo;
    *count = (unsigned)(hi > lo ? hi - lo : 1);
}

/* Context of every symbol under a plan (NULL when it has no source). */
static uint16_t *contexts(const uint8_t *sym, const tf_prog_ctx_source *sources,
                          const tf_prog_lit_plan *plan, size_t n, bool *oom)
{
    *oom = false;
    if (!plan->ctx_sibling && !plan->ctx_self)
        return NULL;
    uint16_t *ctx = malloc((n ? n : 1) * sizeof *ctx);
    if (!ctx) {
        *oom = true;
        return NULL;
    }
    if (plan->ctx_self) {
        const size_t lag = self_lag(streams_for(n), lanes_for(n));
        for (size_t i = 0; i < n; i++)
            ctx[i] = (uint16_t)(i >= lag ? ctx_of(sym[i - lag], plan->ctx_base, plan->ctx_count)
                                         : 0);
        return ctx;
    }
    const uint64_t *v = sources[plan->ctx_sibling - 1].v;
    for (size_t i = 0; i < n; i++)
        ctx[i] = (uint16_t)ctx_of(v[i], plan->ctx_base, plan->ctx_count);
    return ctx;
}

static unsigned n_contexts(const tf_prog_lit_plan *plan)
{
    return plan->ctx_sibling || plan->ctx_self ? plan->ctx_count + 1u : 1u;
}

/* counts[ctx * n_sym + sym] of the plan's contexts (ctx from contexts());
 * NULL when out of memory. */
static uint64_t *count_pairs(const uint8_t *sym, const uint16_t *ctx, size_t n, unsigned n_sym,
                             const tf_prog_lit_plan *plan, tf_error *e)
{
    uint64_t *counts = calloc((size_t)n_contexts(plan) * n_sym, sizeof *counts);
    if (!counts) {
        tf_fail(e, ENOMEM, "prog: out of memory for rANS counts");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        counts[(size_t)(ctx ? ctx[i] : 0) * n_sym + sym[i]]++;
    return counts;
}

/* count_pairs of a plan, from its source's words; NULL on failure. */
static uint64_t *count_plan(const uint8_t *sym, size_t n, unsigned n_sym,
                            const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                            tf_error *e)
{
    bool oom;
    uint16_t *ctx = contexts(sym, sources, plan, n, &oom);
    if (oom) {
        tf_fail(e, ENOMEM, "prog: out of memory for contexts");
        return NULL;
    }
    uint64_t *counts = count_pairs(sym, ctx, n, n_sym, plan, e);
    free(ctx);
    return counts;
}

static int fit_table(const uint64_t *counts, unsigned n_sym, const tf_prog_lit_plan *plan,
                     tf_rans_table *t, tf_error *e)
{
    return tf_rans_table_fit(t, n_contexts(plan), n_sym, plan->prec, counts, e);
}

/* The body after its coding byte, up to the stream: source, n_sym,
 * table. */
static int write_head(unsigned n_sym, const tf_prog_lit_plan *plan, const tf_rans_table *t,
                      tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, plan->ctx_self ? TF_PROG_CTX_SELF : plan->ctx_sibling);
    if (plan->ctx_sibling || plan->ctx_self)
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
    const unsigned k = streams_for(n), lanes = lanes_for(n);
    if (k == 1) {
        int rc = tf_rans_encode(&enc, ctx, sym, n, lanes, out, e);
        tf_rans_encoder_free(&enc);
        return rc;
    }
    /* stream t: the rounds of `lanes` symbols whose number is t mod k */
    uint8_t *part = malloc(n);
    uint16_t *part_ctx = ctx ? malloc(n * sizeof *part_ctx) : NULL;
    int rc = !part || (ctx && !part_ctx) ? tf_fail(e, ENOMEM, "prog: out of memory for streams")
                                         : 0;
    for (unsigned st = 0; st < k && rc == 0; st++) {
        size_t m = 0;
        for (size_t i = (size_t)st * lanes; i < n; i += (size_t)k * lanes)
            for (size_t j = i; j < i + lanes && j < n; j++, m++) {
                part[m] = sym[j];
                if (ctx)
                    part_ctx[m] = ctx[j];
            }
        rc = tf_rans_encode(&enc, part_ctx, part, m, lanes, out, e);
    }
    free(part);
    free(part_ctx);
    tf_rans_encoder_free(&enc);
    return rc;
}

int tf_prog_rans_write(const uint8_t *sym, size_t n, unsigned n_sym,
                       const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                       tf_buf *out, tf_error *e)
{
    bool oom;
    uint16_t *ctx = contexts(sym, sources, plan, n, &oom);
    if (oom)
        return tf_fail(e, ENOMEM, "prog: out of memory for contexts");
    tf_rans_table t;
    uint64_t *counts = count_pairs(sym, ctx, n, n_sym, plan, e);
    int rc = counts ? fit_table(counts, n_sym, plan, &t, e) : -1;
    free(counts);
    if (rc == 0) {
        rc = write_body(sym, ctx, n, n_sym, plan, &t, out, e);
        tf_rans_table_free(&t);
    }
    free(ctx);
    return rc;
}

/* Estimated body size of n symbols with the plan's counts: exact but for
 * the stream's payload, which is taken as the ideal code length of the
 * symbols under the table. */
static int estimate(const uint64_t *counts, size_t n, unsigned n_sym,
                    const tf_prog_lit_plan *plan, size_t *size, tf_error *e)
{
    tf_rans_table t;
    if (fit_table(counts, n_sym, plan, &t, e) < 0)
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
    /* Each stream: varint length | u8 lanes | lane states | u16 words. */
    const unsigned k = streams_for(n);
    size_t stream = 1 + 4 * (size_t)lanes_for(n) + 2 * (size_t)((bits / k + 15) / 16);
    if (write_head(n_sym, plan, &t, &head, e) < 0)
        goto done;
    for (unsigned st = 0; st < k; st++)
        if (tf_buf_varint(&head, stream) < 0)
            goto done;
    *size = head.len + k * stream;
    rc = 0;
done:
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
#define MAX_VARIANTS (N_PRECISIONS * (1 + N_WINDOWS * (TF_PROG_MAX_ARITY + 1)))

typedef struct {
    tf_prog_lit_plan plan;
    size_t estimate;
} variant;

/* The bytes the symbols take at the least under the plan's contexts:
 * their empirical conditional entropy (lane states included: they hold
 * coded bits too). */
static double least_bytes(const uint64_t *counts, unsigned n_sym, const tf_prog_lit_plan *plan)
{
    return tf_rans_entropy_bits(counts, n_contexts(plan), n_sym) / 8;
}

/* The variants of one context setting, one per precision, unless even
 * its least bytes reach `below` (then no table is fitted for it). */
static int add_variants(const uint64_t *counts, size_t n, unsigned n_sym,
                        const tf_prog_lit_plan *base, size_t below, variant *vars,
                        unsigned *n_vars, tf_error *e)
{
    if (least_bytes(counts, n_sym, base) >= (double)below)
        return 0;
    for (size_t p = 0; p < N_PRECISIONS; p++) {
        variant *v = &vars[(*n_vars)++];
        v->plan = *base;
        v->plan.prec = (uint8_t)precisions[p];
        if (estimate(counts, n, n_sym, &v->plan, &v->estimate, e) < 0)
            return -1;
    }
    return 0;
}

/* The counts of a window (plan) taken from those of a wider one (all)
 * holding it, without a pass over the symbols: its contexts are rows of
 * the wider one's, and context 0 holds the rest of every symbol's total
 * (totals: the counts with no source). NULL when out of memory. */
static uint64_t *narrow_counts(const uint64_t *all, const tf_prog_lit_plan *all_plan,
                               const uint64_t *totals, unsigned n_sym,
                               const tf_prog_lit_plan *plan, tf_error *e)
{
    uint64_t *counts = malloc((size_t)n_contexts(plan) * n_sym * sizeof *counts);
    if (!counts) {
        tf_fail(e, ENOMEM, "prog: out of memory for rANS counts");
        return NULL;
    }
    const size_t first = (size_t)(plan->ctx_base - all_plan->ctx_base) + 1;
    memcpy(counts + n_sym, all + first * n_sym, (size_t)plan->ctx_count * n_sym * sizeof *counts);
    for (unsigned s = 0; s < n_sym; s++) {
        uint64_t rest = totals[s];
        for (unsigned c = 1; c <= plan->ctx_count; c++)
            rest -= counts[(size_t)c * n_sym + s];
        counts[s] = rest;
    }
    return counts;
}

/* The variants of one context source (base names it) by the histogram
 * of its words, one per window (and precision). totals: the counts with
 * no source. */
static int add_windows(const uint8_t *sym, size_t n, unsigned n_sym,
                       const tf_prog_ctx_source *sources, const uint32_t *hist, size_t span,
                       const uint64_t *totals, const tf_prog_lit_plan *base, size_t below,
                       variant *vars, unsigned *n_vars, tf_error *e)
{
    tf_prog_lit_plan plans[N_WINDOWS];
    unsigned n_plans = 0, last = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t w = 0; w < N_WINDOWS; w++) {
        tf_prog_lit_plan *p = &plans[n_plans];
        unsigned count;
        *p = *base;
        best_window(hist, span, windows[w], &p->ctx_base, &count);
        if (count < 2 || count == last)
            continue; /* one context is no context; a window seen */
        last = count;
        p->ctx_count = (uint8_t)count;
        lo = p->ctx_base < lo ? p->ctx_base : lo;
        hi = p->ctx_base + count > hi ? p->ctx_base + count : hi;
        n_plans++;
    }
    if (!n_plans)
        return 0;
    /* Counting under the window that spans them all, once, gives every
     * window's counts (the windows are near the mode, so that one is
     * rarely much wider than the widest); where it would be too wide for
     * a plan, each window is counted on its own. */
    tf_prog_lit_plan all = *base;
    uint64_t *all_counts = NULL;
    if (hi - lo <= UINT8_MAX) {
        all.ctx_base = lo;
        all.ctx_count = (uint8_t)(hi - lo);
        if (!(all_counts = count_plan(sym, n, n_sym, sources, &all, e)))
            return -1;
    }
    int rc = 0;
    for (unsigned i = 0; i < n_plans && rc == 0; i++) {
        uint64_t *counts = all_counts
                               ? narrow_counts(all_counts, &all, totals, n_sym, &plans[i], e)
                               : count_plan(sym, n, n_sym, sources, &plans[i], e);
        rc = counts ? add_variants(counts, n, n_sym, &plans[i], below, vars, n_vars, e) : -1;
        free(counts);
    }
    free(all_counts);
    return rc;
}

/* Every (context source and window, precision) variant with its
 * estimate: no source, each usable sibling, the literal's own words. */
static int list_variants(const uint8_t *sym, size_t n, unsigned n_sym,
                         const tf_prog_ctx_source *sources, unsigned n_src, size_t below,
                         variant *vars, unsigned *n_vars, tf_error *e)
{
    *n_vars = 0;
    tf_prog_lit_plan base = { .coding = TF_PROG_CODE_RANS };
    uint64_t *totals = count_pairs(sym, NULL, n, n_sym, &base, e);
    if (!totals)
        return -1;
    uint32_t *hist = malloc(((size_t)1 << MAX_SOURCE_WIDTH) * sizeof *hist);
    int rc = hist ? add_variants(totals, n, n_sym, &base, below, vars, n_vars, e)
                  : tf_fail(e, ENOMEM, "prog: out of memory for a context window");
    for (unsigned j = 1; j <= n_src && rc == 0; j++) {
        const tf_prog_ctx_source *src = &sources[j - 1];
        if (!src->v || src->width > MAX_SOURCE_WIDTH)
            continue;
        size_t span = (size_t)1 << src->width;
        memset(hist, 0, span * sizeof *hist);
        for (size_t i = 0; i < n; i++)
            hist[src->v[i]]++;
        base.ctx_sibling = (uint8_t)j;
        rc = add_windows(sym, n, n_sym, sources, hist, span, totals, &base, below, vars, n_vars,
                         e);
    }
    if (rc == 0) {
        for (unsigned s = 0; s < n_sym; s++)
            hist[s] = (uint32_t)totals[s];
        base.ctx_sibling = 0;
        base.ctx_self = true;
        rc = add_windows(sym, n, n_sym, sources, hist, n_sym, totals, &base, below, vars, n_vars,
                         e);
    }
    free(hist);
    free(totals);
    return rc;
}

int tf_prog_rans_plan(const uint8_t *sym, size_t n, unsigned n_sym,
                      const tf_prog_ctx_source *sources, unsigned n_src, size_t below,
                      tf_prog_lit_plan *plan, tf_error *e)
{
    variant vars[MAX_VARIANTS];
    unsigned n_vars;
    if (n_src > TF_PROG_MAX_ARITY)
        n_src = TF_PROG_MAX_ARITY;
    plan->size = SIZE_MAX;
    if (below == 0) /* nothing can win */
        return 0;
    if (list_variants(sym, n, n_sym, sources, n_src, below, vars, &n_vars, e) < 0)
        return -1;
    size_t best_estimate = SIZE_MAX;
    for (unsigned i = 0; i < n_vars; i++)
        best_estimate = vars[i].estimate < best_estimate ? vars[i].estimate : best_estimate;
    /* Encoding, the costly part, only for what can still win: the lane
     * states the estimate counts whole may carry up to 4 bytes each of
     * the payload it counts too. */
    const size_t margin = EXACT_SLACK + 4 * (size_t)lanes_for(n) * streams_for(n);
    plan->size = SIZE_MAX;
    for (unsigned i = 0; i < n_vars; i++) {
        if (vars[i].estimate > best_estimate + EXACT_SLACK || vars[i].estimate >= below + margin)
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

unsigned tf_prog_rans_self_lag(size_t n)
{
    return self_lag(streams_for(n), lanes_for(n));
}

void tf_prog_rans_self_plan(const uint64_t *count, unsigned n_sym, unsigned window,
                            unsigned prec, tf_prog_lit_plan *plan)
{
    uint32_t hist[TF_RANS_MAX_SYMBOLS];
    for (unsigned s = 0; s < n_sym; s++)
        hist[s] = count[s] > UINT32_MAX ? UINT32_MAX : (uint32_t)count[s];
    unsigned n_ctx;
    *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RANS, .prec = (uint8_t)prec,
                                .ctx_self = true, .size = SIZE_MAX };
    best_window(hist, n_sym, window < MAX_WINDOW ? window : MAX_WINDOW, &plan->ctx_base,
                &n_ctx);
    plan->ctx_count = (uint8_t)n_ctx;
}

/* ---- decoding ---- */

/* The dense slots (prog_leaf.h), a row of zeros for a context the table
 * has no row for: decoding through it is harmless, and
 * tf_rans_decode_rows notes that it happened. */
static int build_slots(tf_prog_lit_reader *r, unsigned n_ctx, tf_error *e)
{
    const size_t row = (size_t)1 << r->table.prec;
    r->slots = malloc(n_ctx * row * sizeof *r->slots);
    if (!r->slots)
        return tf_fail(e, ENOMEM, "prog: out of memory for rANS slots");
    for (unsigned c = 0; c < n_ctx; c++)
        tf_rans_row_slots(&r->table, c, r->slots + (c ? c - 1 : r->ctx_count) * row);
    return 0;
}

int tf_prog_rans_open(tf_prog_lit_reader *r, tf_cursor *in, const tf_prog_siblings *siblings,
                      tf_error *e)
{
    unsigned source = tf_read_u8(in);
    r->ctx_self = source == TF_PROG_CTX_SELF;
    r->ctx_sibling = r->ctx_self ? 0 : source;
    if (source) {
        r->ctx_base = tf_read_varint(in);
        r->ctx_count = tf_read_u8(in);
        if (in->bad || r->ctx_count == 0 || r->ctx_count > MAX_WINDOW ||
            (!r->ctx_self && (!siblings || source > siblings->count ||
                              siblings->width[source - 1] > MAX_SOURCE_WIDTH)))
            return tf_fail(e, EIO, "prog: rANS literal has an invalid context source");
        r->source_width = r->ctx_self ? (r->width < 8 ? r->width : 8)
                                      : siblings->width[source - 1];
        if (r->ctx_base >> r->source_width) /* then no word could have a context */
            return tf_fail(e, EIO, "prog: rANS literal has an invalid context base");
    }
    uint64_t n_sym = tf_read_varint(in);
    uint64_t max_sym = r->width >= 8 ? 256 : (uint64_t)1 << r->width;
    if (in->bad || n_sym == 0 || n_sym > max_sym)
        return tf_fail(e, EIO, "prog: rANS literal of %llu symbols in %u bits",
                       (unsigned long long)n_sym, r->width);
    unsigned n_ctx = source ? r->ctx_count + 1u : 1u;
    if (tf_rans_table_read(&r->table, in, n_ctx, (unsigned)n_sym, e) < 0 ||
        build_slots(r, n_ctx, e) < 0)
        return -1;
    r->n_streams = streams_for(r->n);
    for (unsigned st = 0; st < r->n_streams; st++)
        if (tf_rans_stream_open(&r->stream[st], in, e) < 0)
            return -1;
    if (r->stream[r->n_streams - 1].lanes != r->stream[0].lanes)
        return tf_fail(e, EIO, "prog: rANS literal has streams of different lanes");
    if (tf_cursor_left(in))
        return tf_fail(e, EIO, "prog: rANS literal has trailing bytes");
    for (unsigned j = 0; j < TF_PROG_SELF_MAX; j++) /* no word yet: context 0 */
        r->last[j] = (uint32_t)r->ctx_base + r->ctx_count;
    return 0;
}

void tf_prog_rans_read(tf_prog_lit_reader *r, uint32_t *out, size_t count,
                       const uint32_t *ctx_words)
{
    /* ctx_base < 2^16 (tf_prog_rans_open) */
    const uint32_t base = (uint32_t)r->ctx_base;
    const unsigned prec = r->table.prec, k = r->n_streams;
    if (!r->ctx_self) {
        r->bad |= !tf_rans_decode_rows(r->stream, k, r->done, r->slots, prec,
                                       r->ctx_sibling ? ctx_words : NULL, base, r->ctx_count,
                                       out, count, r->simd);
    } else {
        /* The context of a word is the word a turn earlier: for the first
         * turn of these, a word of earlier calls (r->last holds the last
         * turn, by position); then one of these, a turn behind (which
         * tf_rans_decode_rows allows). */
        const unsigned turn = self_lag(k, r->stream[0].lanes);
        const size_t head = count < turn ? count : turn;
        uint32_t earlier[TF_PROG_SELF_MAX] = { 0 };
        for (size_t j = 0; j < head; j++)
            earlier[j] = r->last[(r->done + j) % turn];
        bool ok = tf_rans_decode_rows(r->stream, k, r->done, r->slots, prec, earlier, base,
                                      r->ctx_count, out, head, r->simd);
        if (count > head)
            ok &= tf_rans_decode_rows(r->stream, k, r->done + head, r->slots, prec, out, base,
                                      r->ctx_count, out + head, count - head, r->simd);
        for (size_t j = count - head; j < count; j++)
            r->last[(r->done + j) % turn] = out[j];
        r->bad |= !ok;
    }
    for (unsigned st = 0; st < k; st++)
        r->bad |= r->stream[st].bad;
}
