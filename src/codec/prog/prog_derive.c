#include "codec/prog/prog_derive.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_ops.h"

/* Concat splits at constant runs at least this long (and n / RUN_SHARE),
 * the MAX_RUNS longest of them. */
#define MIN_RUN 32
#define RUN_SHARE 64
#define MAX_RUNS 8
/* Mantissa bits MERGE_IEEE_HIGH splits off the top, for a literal under
 * the exponent's contexts: the ones that follow the exponent (on
 * prog_bench's float32 files 4 did better than 2 or 7, whose table rows
 * cost more than the context saves). */
#define HIGH_MANTISSA 4
/* ...and only where the exponent tells at least this many bits a word of
 * them: a literal more to decode slows decoding (on those files by about
 * a tenth) and otherwise buys too little. */
#define HIGH_GAIN 0.1
/* Guards and the bit profile look at most this many words. */
#define GUARD_SAMPLE 65536
/* A lagged scan is looked for on words of at most LAG_VALUES values (a
 * mask has two; weights show more within a few words, which keeps the
 * look cheap), at lags summing two consecutive runs of the first
 * LAG_RUNS: rows of a triangle have runs r, m - r, r + 1, m - r - 1, ...
 * whose pairs sum to the row length m or m + 1. */
#define LAG_VALUES 4
#define LAG_RUNS 16
#define LAG_CHANGES 8

tf_prog_op tf_prog_rule_op(unsigned rule)
{
    switch (rule) {
    case TF_PROG_R_LIT: return TF_PROG_LIT;
    case TF_PROG_R_CONST: return TF_PROG_CONST;
    case TF_PROG_R_REPEAT: return TF_PROG_REPEAT;
    case TF_PROG_R_CONCAT: return TF_PROG_CONCAT;
    case TF_PROG_R_SCAN_XOR:
    case TF_PROG_R_SCAN_ADD:
    case TF_PROG_R_SCAN_XOR_LAG:
    case TF_PROG_R_SCAN_ADD_LAG: return TF_PROG_SCAN;
    default: return rule < TF_PROG_R_SCAN_XOR ? TF_PROG_MAP : TF_PROG_MERGE;
    }
}

static unsigned map_kind(unsigned rule)
{
    return rule - TF_PROG_R_MAP_XOR;
}

static bool ieee_width(unsigned dtype, unsigned width, unsigned *e, unsigned *m)
{
    return tf_prog_ieee_fields(dtype, e, m) && width == 1 + *e + *m;
}

bool tf_prog_rule_admissible(unsigned rule, unsigned width, uint64_t n, unsigned dtype,
                             unsigned parent_rule, unsigned depth)
{
    unsigned e, m;
    tf_prog_op op = tf_prog_rule_op(rule), parent = parent_rule == TF_PROG_R_NONE
                                                        ? TF_PROG_HOLE
                                                        : tf_prog_rule_op(parent_rule);
    if (op != TF_PROG_LIT && op != TF_PROG_CONST && depth >= 4)
        return false; /* the paper's depth limit */
    /* Canonical forms: no map of a map, merge of a merge, repeat of a
     * repeat or concat of a concat (each collapses into one). */
    if (op == parent && op != TF_PROG_SCAN)
        return false;
    switch (rule) {
    case TF_PROG_R_LIT: return true;
    case TF_PROG_R_CONST: return n >= 1;
    case TF_PROG_R_REPEAT:
    case TF_PROG_R_CONCAT:
    case TF_PROG_R_SCAN_XOR:
    case TF_PROG_R_SCAN_ADD: return n >= 2;
    case TF_PROG_R_SCAN_XOR_LAG:
    case TF_PROG_R_SCAN_ADD_LAG: return n >= 4; /* lags are 2 to n / 2 */
    case TF_PROG_R_MAP_XOR:
    case TF_PROG_R_MAP_ADD: return n >= 1;
    case TF_PROG_R_MAP_ZIGZAG:
    case TF_PROG_R_MAP_GRAY:
    case TF_PROG_R_MAP_BITREV:
    case TF_PROG_R_MAP_ROTL: return n >= 1 && width >= 2;
    case TF_PROG_R_MERGE_IEEE:
    case TF_PROG_R_MERGE_IEEE_ROT: return n >= 1 && ieee_width(dtype, width, &e, &m);
    case TF_PROG_R_MERGE_IEEE_BYTES:
    case TF_PROG_R_MERGE_IEEE_HIGH: return n >= 1 && ieee_width(dtype, width, &e, &m) && m > 8;
    case TF_PROG_R_MERGE_BYTES: return n >= 1 && width % 8 == 0 && width >= 16;
    case TF_PROG_R_MERGE_BITS: return n >= 1 && width >= 2 && width <= 8;
    case TF_PROG_R_MERGE_HEAD: return n >= 1 && width > 8 && width % 8;
    case TF_PROG_R_MERGE_PROFILE: return n >= 1 && width >= 2;
    }
    return false;
}

unsigned tf_prog_rule_of_node(const tf_prog *p, unsigned i)
{
    const tf_prog_node *k = &p->node[i];
    switch (k->op) {
    case TF_PROG_LIT: return TF_PROG_R_LIT;
    case TF_PROG_CONST: return TF_PROG_R_CONST;
    case TF_PROG_REPEAT: return TF_PROG_R_REPEAT;
    case TF_PROG_CONCAT: return TF_PROG_R_CONCAT;
    case TF_PROG_MAP: return TF_PROG_R_MAP_XOR + k->kind;
    case TF_PROG_SCAN: return TF_PROG_R_SCAN_XOR + k->kind;
    default: return TF_PROG_R_MERGE_PROFILE;
    }
}

/* ---- word statistics for guards ---- */

static unsigned bit_length(uint64_t v)
{
    return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

static size_t sample_len(size_t n)
{
    return n < GUARD_SAMPLE ? n : GUARD_SAMPLE;
}

/* Bit length of the OR of the sampled words after map u^-1. */
static unsigned mapped_bits(unsigned kind, uint64_t param, const tf_prog_stream *x)
{
    uint64_t buf[256], all = 0;
    size_t n = sample_len(x->n);
    for (size_t at = 0; at < n; at += 256) {
        size_t k = n - at < 256 ? n - at : 256;
        tf_prog_map_invert(kind, param, x->width, x->v + at, buf, k);
        for (size_t i = 0; i < k; i++)
            all |= buf[i];
    }
    return bit_length(all);
}

static uint64_t popcount_sum(const uint64_t *v, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (uint64_t)__builtin_popcountll(v[i]);
    return sum;
}

/* How many of the first n words have the bit set. */
static size_t ones_at(const tf_prog_stream *x, unsigned bit, size_t n)
{
    size_t ones = 0;
    for (size_t i = 0; i < n; i++)
        ones += x->v[i] >> bit & 1;
    return ones;
}

/* Whether the rarer value of a bit set in `ones` of n words is rarer
 * than one word in `share`. */
static bool skewed(size_t ones, size_t n, size_t share)
{
    return ones < n / share || n - ones < n / share;
}

static bool map_guard(unsigned kind, uint64_t param, const tf_prog_stream *x)
{
    size_t n = sample_len(x->n);
    unsigned plain = mapped_bits(TF_PROG_MAP_XOR, 0, x);
    switch (kind) {
    case TF_PROG_MAP_XOR:
    case TF_PROG_MAP_ADD:
    case TF_PROG_MAP_ZIGZAG:
    case TF_PROG_MAP_BITREV: return mapped_bits(kind, param, x) < plain;
    case TF_PROG_MAP_GRAY: {
        uint64_t before = popcount_sum(x->v, n), after = 0;
        for (size_t i = 0; i < n; i++)
            after += (uint64_t)__builtin_popcountll(x->v[i] ^ (x->v[i] >> 1));
        return 4 * after < 3 * before;
    }
    case TF_PROG_MAP_ROTL: /* a noisy top bit (a sign) over skewed ones (an exponent) */
        return n >= 16 && !skewed(ones_at(x, x->width - 1, n), n, 16) &&
               skewed(ones_at(x, x->width - 2, n), n, 16);
    }
    return false;
}

/* Words of x[lag..n) that differ from the word lag before. */
static uint64_t lag_changes(const uint64_t *v, size_t n, size_t lag)
{
    uint64_t changes = 0;
    for (size_t i = lag; i < n; i++)
        changes += v[i] != v[i - lag];
    return changes;
}

/* Finds x's lag at which a lagged scan's updates are sparsest, on a
 * sample: a row-dependent structure (a triangle changes one word a row
 * at lag m: the diagonal). Sparse when they are nonzero a third less
 * often than lag 1's (a triangle's, half as often: a row starts and ends
 * a run). Only words of few values that change at most every
 * LAG_CHANGES words are looked at: weights and noisy bits bail out in
 * one pass. */
static void find_lag(tf_prog_stream *x)
{
    if (x->lag_looked)
        return;
    x->lag_looked = true;
    const uint64_t *v = x->v;
    size_t n = sample_len(x->n);
    uint64_t value[LAG_VALUES], changes = 0;
    unsigned values = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned k = 0;
        while (k < values && value[k] != v[i])
            k++;
        if (k == LAG_VALUES)
            return;
        if (k == values)
            value[values++] = v[i];
        changes += i && v[i] != v[i - 1];
    }
    if (changes * LAG_CHANGES >= n)
        return;
    x->lag_values = (uint8_t)values;
    size_t run[LAG_RUNS], runs = 0;
    for (size_t i = 0; i < n && runs < LAG_RUNS;) {
        size_t j = i + 1;
        while (j < n && v[j] == v[i])
            j++;
        run[runs++] = j - i;
        i = j;
    }
    uint64_t best = 0;
    for (size_t r = 0; r + 1 < runs; r++) {
        size_t lag = run[r] + run[r + 1];
        bool tried = false;
        for (size_t q = 0; q < r; q++)
            tried |= run[q] + run[q + 1] == lag;
        if (tried || lag > n / 2)
            continue;
        /* the words of the sample the child keeps nonzero once a map_xor
         * has cleared the commonest of the first lag (which it passes
         * through); the shorter lag of equal ones */
        size_t count[LAG_VALUES] = { 0 };
        unsigned top = 0;
        for (size_t i = 0; i < lag; i++)
            for (unsigned k = 0; k < values; k++)
                count[k] += v[i] == value[k];
        for (unsigned k = 1; k < values; k++)
            top = count[k] > count[top] ? k : top;
        uint64_t kept = lag - count[top] + lag_changes(v, n, lag);
        if (!x->lag || kept < best || (kept == best && lag < x->lag)) {
            x->lag = lag;
            x->lag_clear = value[top];
            best = kept;
        }
    }
    x->lag_sparse = x->lag && 3 * best < 2 * changes;
}

/* *clears: the constant is one that clears most of the words a lagged
 * scan passes through (its first row), which the guard then accepts. */
static uint64_t map_param(unsigned kind, tf_prog_stream *x, const tf_prog_expansion *shape,
                          bool *clears)
{
    *clears = false;
    if (kind == TF_PROG_MAP_XOR) {
        /* a causal mask of 0 under -inf: the lagged scan needs -inf
         * xor-ed away first */
        find_lag(x);
        *clears = x->lag_sparse && x->lag_clear != 0;
        return *clears ? x->lag_clear : x->n ? x->v[0] : 0;
    }
    if (kind == TF_PROG_MAP_ADD) {
        uint64_t min = UINT64_MAX;
        for (size_t i = 0; i < x->n; i++)
            min = x->v[i] < min ? x->v[i] : min;
        return x->n ? min : 0;
    }
    if (kind == TF_PROG_MAP_ROTL)
        return shape ? shape->param : 1;
    return 0;
}

static bool scan_guard(unsigned kind, const tf_prog_stream *x)
{
    size_t n = sample_len(x->n);
    const uint64_t mask = tf_prog_mask(x->width);
    if (kind == TF_PROG_SCAN_XOR) {
        uint64_t diff = 0;
        for (size_t i = 1; i < n; i++)
            diff += (uint64_t)__builtin_popcountll(x->v[i] ^ x->v[i - 1]);
        return 2 * diff < popcount_sum(x->v, n);
    }
    uint64_t deltas = 0, words = 0;
    for (size_t i = 1; i < n; i++) {
        deltas |= tf_prog_zigzag_encode((x->v[i] - x->v[i - 1]) & mask, x->width);
        words |= tf_prog_zigzag_encode(x->v[i], x->width);
    }
    return bit_length(deltas) < bit_length(words);
}

static double entropy_bits(const uint32_t *count, size_t k, size_t n)
{
    double bits = 0;
    for (size_t i = 0; i < k; i++)
        if (count[i])
            bits -= (double)count[i] * log2((double)count[i] / (double)n);
    return bits;
}

/* Whether the exponent (e bits over m mantissa bits) tells HIGH_GAIN
 * bits a word of the top HIGH_MANTISSA mantissa bits, on a sample:
 * H(top) - H(top | exponent), the joint counts cut to the low 8 bits of
 * the exponent. */
static int high_guard(const tf_prog_stream *x, unsigned m, bool *ok)
{
    enum { TOPS = 1 << HIGH_MANTISSA };
    size_t n = sample_len(x->n);
    uint32_t *joint = calloc(256 * TOPS, sizeof *joint), top[TOPS] = { 0 }, exp[256] = { 0 };
    if (!joint)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned t = (unsigned)(x->v[i] >> (m - HIGH_MANTISSA)) & (TOPS - 1);
        unsigned e = (unsigned)(x->v[i] >> m) & 255;
        joint[e * TOPS + t]++;
        top[t]++;
        exp[e]++;
    }
    double gain = entropy_bits(top, TOPS, n) + entropy_bits(exp, 256, n) -
                  entropy_bits(joint, 256 * TOPS, n);
    free(joint);
    *ok = gain >= HIGH_GAIN * (double)n;
    return 0;
}

/* ---- structure finders ---- */

static bool all_equal(const uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[0])
            return false;
    return n >= 1;
}

/* Smallest period m <= n / 2 (x[i] == x[i - m] for every i >= m), or 0.
 * By the prefix function: the longest proper border of x has length
 * n - m. */
static int smallest_period(const uint64_t *x, size_t n, size_t *period)
{
    *period = 0;
    size_t again = 0;
    for (size_t i = 1; i < n; i++)
        again += x[i] == x[0];
    if (n < 2 || again == 0) /* x[m] == x[0] for a period m */
        return 0;
    size_t *border = malloc(n * sizeof *border);
    if (!border)
        return -1;
    border[0] = 0;
    for (size_t i = 1; i < n; i++) {
        size_t k = border[i - 1];
        while (k > 0 && x[i] != x[k])
            k = border[k - 1];
        border[i] = k + (x[i] == x[k]);
    }
    size_t m = n - border[n - 1];
    free(border);
    *period = m <= n / 2 ? m : 0;
    return 0;
}

typedef struct {
    size_t start, len;
} run;

/* Long constant runs, at most MAX_RUNS of the longest (the earlier of
 * equal ones), in order of position. */
static unsigned long_runs(const uint64_t *x, size_t n, run *runs)
{
    size_t min = n / RUN_SHARE > MIN_RUN ? n / RUN_SHARE : MIN_RUN;
    run all[RUN_SHARE]; /* runs of n / RUN_SHARE words: at most RUN_SHARE */
    unsigned count = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && x[j] == x[i])
            j++;
        if (j - i >= min && count < RUN_SHARE)
            all[count++] = (run){ i, j - i };
        i = j;
    }
    unsigned keep = count < MAX_RUNS ? count : MAX_RUNS;
    bool taken[RUN_SHARE] = { false };
    for (unsigned r = 0; r < keep; r++) {
        unsigned best = count;
        for (unsigned c = 0; c < count; c++)
            if (!taken[c] && (best == count || all[c].len > all[best].len))
                best = c;
        taken[best] = true;
    }
    unsigned k = 0;
    for (unsigned c = 0; c < count; c++)
        if (taken[c])
            runs[k++] = all[c];
    return k;
}

/* ---- expansions ---- */

static tf_prog_kid *add_kid(tf_prog_expansion *out, unsigned width, uint64_t n)
{
    tf_prog_kid *k = &out->kid[out->n_kids++];
    *k = (tf_prog_kid){ .width = width, .n = n };
    return k;
}

/* A kid whose target is to be filled by the caller. */
static int add_stream_kid(tf_prog_expansion *out, unsigned width, size_t n, size_t *bytes,
                          tf_error *e)
{
    tf_prog_kid *k = add_kid(out, width, n);
    k->target = tf_prog_stream_new(n, width, bytes);
    return k->target ? 0 : tf_fail(e, ENOMEM, "prog: out of memory for a target");
}

static int derive_concat(const tf_prog_stream *x, tf_prog_expansion *out, size_t *bytes,
                         tf_error *e)
{
    run runs[MAX_RUNS];
    unsigned count = long_runs(x->v, x->n, runs);
    if (count == 0 || (count == 1 && runs[0].len == x->n))
        return 0;
    out->op = TF_PROG_CONCAT;
    size_t at = 0;
    for (unsigned r = 0; r <= count; r++) {
        size_t end = r < count ? runs[r].start : x->n;
        if (end > at) {
            if (add_stream_kid(out, x->width, end - at, bytes, e) < 0)
                return -1;
            memcpy(out->kid[out->n_kids - 1].target->v, x->v + at, (end - at) * sizeof *x->v);
        }
        if (r < count) {
            tf_prog_kid *k = add_kid(out, x->width, runs[r].len);
            k->is_const = true;
            k->value = x->v[runs[r].start];
            at = runs[r].start + runs[r].len;
        }
    }
    return 1;
}

/* Field widths of a merge rule for this hole (0 when none). */
static unsigned merge_layout(unsigned rule, const tf_prog_stream *x, unsigned dtype,
                             uint8_t *w)
{
    unsigned e = 0, m = 0, b = x->width, k = 0;
    bool ieee = ieee_width(dtype, b, &e, &m);
    switch (rule) {
    case TF_PROG_R_MERGE_IEEE:
    case TF_PROG_R_MERGE_IEEE_BYTES:
        if (!ieee)
            return 0;
        w[k++] = 1;
        w[k++] = (uint8_t)e;
        if (rule == TF_PROG_R_MERGE_IEEE) {
            w[k++] = (uint8_t)m;
            return k;
        }
        for (; m > 8; m -= 8)
            w[k++] = 8;
        w[k++] = (uint8_t)m;
        return k;
    case TF_PROG_R_MERGE_IEEE_HIGH:
        if (!ieee)
            return 0;
        w[0] = 1;
        w[1] = (uint8_t)e;
        w[2] = HIGH_MANTISSA;
        w[3] = (uint8_t)(m - HIGH_MANTISSA);
        return 4;
    case TF_PROG_R_MERGE_IEEE_ROT:
        if (!ieee)
            return 0;
        w[0] = (uint8_t)e;
        w[1] = (uint8_t)m;
        w[2] = 1;
        return 3;
    case TF_PROG_R_MERGE_BYTES:
    case TF_PROG_R_MERGE_BITS: {
        unsigned part = rule == TF_PROG_R_MERGE_BYTES ? 8 : 1;
        for (k = 0; k < b / part; k++)
            w[k] = (uint8_t)part;
        return k;
    }
    case TF_PROG_R_MERGE_HEAD:
        w[0] = 8;
        w[1] = (uint8_t)(b - 8);
        return 2;
    }
    /* Profile, from the top bit down: runs of constant bits, runs of
     * skewed bits (at most 8, for an entropy coder), runs of the rest. */
    size_t n = sample_len(x->n);
    int prev = -1;
    for (unsigned bit = b; bit-- > 0;) {
        size_t ones = ones_at(x, bit, n);
        int cls = ones == 0 || ones == n ? 0 : skewed(ones, n, 4) ? 1 : 2;
        if (cls == prev && !(cls == 1 && w[k - 1] == 8))
            w[k - 1]++;
        else
            w[k++] = 1;
        prev = cls;
    }
    return k >= 2 ? k : 0;
}

static int derive_merge(unsigned rule, const tf_prog_stream *x, unsigned dtype,
                        const tf_prog_expansion *shape, tf_prog_expansion *out, size_t *bytes,
                        tf_error *e)
{
    uint8_t w[TF_PROG_MAX_ARITY];
    unsigned k = 0;
    if (shape)
        for (; k < shape->n_kids; k++)
            w[k] = (uint8_t)shape->kid[k].width;
    else
        k = merge_layout(rule, x, dtype, w);
    if (k < 2)
        return 0;
    out->op = TF_PROG_MERGE;
    unsigned shift = x->width;
    for (unsigned c = 0; c < k; c++) {
        if (add_stream_kid(out, w[c], x->n, bytes, e) < 0)
            return -1;
        shift -= w[c];
        tf_prog_split_field(x->v, shift, w[c], out->kid[c].target->v, x->n);
    }
    return 1;
}

static int derive_lagged_scan(unsigned kind, tf_prog_stream *x, bool guarded,
                              tf_prog_expansion *out, size_t *bytes, tf_error *e)
{
    find_lag(x);
    if (!x->lag)
        return 0;
    /* Its first lag words pass through: where they are mostly another
     * value, the map_xor that clears them comes first. Words periodic at
     * the lag are a repeat's, in fewer words. Of two values, xor leaves
     * one in the updates, add two. Proposing what does no better would
     * spend the memory of a search of a large mask. */
    if (guarded && (!x->lag_sparse || x->lag_clear != 0 ||
                    lag_changes(x->v, sample_len(x->n), x->lag) == 0 ||
                    (kind == TF_PROG_SCAN_ADD_LAG && x->lag_values <= 2)))
        return 0;
    if (add_stream_kid(out, x->width, x->n, bytes, e) < 0)
        return -1;
    out->op = TF_PROG_SCAN;
    out->kind = (uint8_t)kind;
    out->param = x->lag;
    tf_prog_scan_lag_invert(kind, x->width, x->lag, x->v, out->kid[0].target->v, x->n);
    return 1;
}

static int derive(unsigned rule, tf_prog_stream *x, unsigned dtype, bool guarded,
                  const tf_prog_expansion *shape, tf_prog_expansion *out, size_t *bytes,
                  tf_error *e)
{
    const size_t n = x->n;
    switch (tf_prog_rule_op(rule)) {
    case TF_PROG_CONST:
        if (!all_equal(x->v, n))
            return 0;
        out->op = TF_PROG_CONST;
        out->param = x->v[0];
        return 1;
    case TF_PROG_REPEAT: {
        size_t m;
        if (smallest_period(x->v, n, &m) < 0)
            return tf_fail(e, ENOMEM, "prog: out of memory finding a period");
        if (m == 0 || add_stream_kid(out, x->width, m, bytes, e) < 0)
            return m == 0 ? 0 : -1;
        out->op = TF_PROG_REPEAT;
        out->param = m;
        memcpy(out->kid[0].target->v, x->v, m * sizeof *x->v);
        return 1;
    }
    case TF_PROG_CONCAT: return derive_concat(x, out, bytes, e);
    case TF_PROG_MAP: {
        unsigned kind = map_kind(rule);
        bool clears;
        uint64_t param = map_param(kind, x, shape, &clears);
        if (n < 1 || (guarded && !clears && !map_guard(kind, param, x)) ||
            (kind == TF_PROG_MAP_ROTL && (param < 1 || param >= x->width)))
            return 0;
        if (add_stream_kid(out, x->width, n, bytes, e) < 0)
            return -1;
        out->op = TF_PROG_MAP;
        out->kind = (uint8_t)kind;
        out->param = param;
        tf_prog_map_invert(kind, param, x->width, x->v, out->kid[0].target->v, n);
        return 1;
    }
    case TF_PROG_SCAN: {
        unsigned kind = rule - TF_PROG_R_SCAN_XOR;
        if (tf_prog_scan_lagged(kind))
            return derive_lagged_scan(kind, x, guarded, out, bytes, e);
        if (n < 2 || (guarded && !scan_guard(kind, x)))
            return 0;
        if (add_stream_kid(out, x->width, n - 1, bytes, e) < 0)
            return -1;
        out->op = TF_PROG_SCAN;
        out->kind = (uint8_t)kind;
        out->param = x->v[0];
        tf_prog_scan_invert(kind, x->width, x->v, out->kid[0].target->v, n);
        return 1;
    }
    case TF_PROG_MERGE: {
        unsigned eb, mb;
        bool ok = true;
        if (guarded && rule == TF_PROG_R_MERGE_IEEE_HIGH && ieee_width(dtype, x->width, &eb, &mb) &&
            high_guard(x, mb, &ok) < 0)
            return tf_fail(e, ENOMEM, "prog: out of memory for a guard");
        return n >= 1 && ok ? derive_merge(rule, x, dtype, shape, out, bytes, e) : 0;
    }
    default: return 0;
    }
}

int tf_prog_derive(unsigned rule, tf_prog_stream *x, unsigned dtype, bool guarded,
                   const tf_prog_expansion *shape, tf_prog_expansion *out, size_t *bytes,
                   tf_error *e)
{
    *out = (tf_prog_expansion){ 0 };
    /* Of constant words, a constant is the smallest program. */
    if (guarded && rule != TF_PROG_R_CONST && all_equal(x->v, x->n))
        return 0;
    /* Of a mask (words of few values, sparse at a lag), the lagged scan
     * (after a map_xor that clears its first row) is: a merge's fields
     * are the same mask or constants, a map relabels its values, a scan
     * of lag 1 is denser. Proposing them would only spend a search of a
     * large mask's memory on targets as large. */
    if (guarded && rule != TF_PROG_R_CONST && rule != TF_PROG_R_REPEAT &&
        rule != TF_PROG_R_CONCAT && rule != TF_PROG_R_MAP_XOR &&
        rule != TF_PROG_R_SCAN_XOR_LAG && rule != TF_PROG_R_SCAN_ADD_LAG) {
        find_lag(x);
        if (x->lag_sparse)
            return 0;
    }
    int rc = derive(rule, x, dtype, guarded, shape, out, bytes, e);
    if (rc <= 0)
        tf_prog_expansion_release(out, bytes);
    return rc;
}

void tf_prog_expansion_release(tf_prog_expansion *x, size_t *bytes)
{
    for (unsigned c = 0; c < x->n_kids; c++) {
        tf_prog_stream_unref(x->kid[c].target, bytes);
        x->kid[c].target = NULL;
    }
    x->n_kids = 0;
}

int tf_prog_expansion_build(tf_prog_expansion *x, tf_prog_tree *t, unsigned i)
{
    if (tf_prog_holds_words(x->op, x->kind)) {
        uint64_t held = x->param;
        for (unsigned j = 0; j < t->prog.n_nodes; j++)
            if (tf_prog_holds_words(t->prog.node[j].op, t->prog.node[j].kind))
                held += t->prog.node[j].param;
        if (held > t->prog.node[0].n)
            return -1;
    }
    tf_prog_node *k = &t->prog.node[i];
    k->op = x->op;
    k->kind = x->kind;
    k->param = x->param;
    if (x->n_kids == 0)
        return 0;
    int first = tf_prog_add_kids(&t->prog, i, x->n_kids);
    if (first < 0)
        return -1;
    for (unsigned c = 0; c < x->n_kids; c++) {
        unsigned j = (unsigned)first + c;
        tf_prog_node *kid = &t->prog.node[j];
        kid->width = (uint8_t)x->kid[c].width;
        kid->n = x->kid[c].n;
        t->target[j] = x->kid[c].target;
        x->kid[c].target = NULL;
        t->rule[j] = TF_PROG_R_NONE;
        if (x->kid[c].is_const) {
            kid->op = TF_PROG_CONST;
            kid->param = x->kid[c].value;
        }
    }
    return 0;
}
