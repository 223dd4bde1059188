#include "codec/entropy/rans.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

void tf_rans_table_free(tf_rans_table *t)
{
    free(t->row_of_ctx);
    free(t->freq);
    *t = (tf_rans_table){ 0 };
}

static int table_alloc(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                       unsigned n_rows, tf_error *e)
{
    *t = (tf_rans_table){ .n_ctx = n_ctx, .n_sym = n_sym, .prec = prec, .n_rows = n_rows };
    t->row_of_ctx = malloc((size_t)n_ctx * sizeof *t->row_of_ctx);
    t->freq = calloc((size_t)n_rows * n_sym + 1, sizeof *t->freq);
    if (!t->row_of_ctx || !t->freq) {
        tf_rans_table_free(t);
        return tf_fail(e, ENOMEM, "rans: out of memory for a table");
    }
    for (unsigned c = 0; c < n_ctx; c++)
        t->row_of_ctx[c] = -1;
    return 0;
}

static int check_shape(unsigned n_ctx, unsigned n_sym, unsigned prec, tf_error *e)
{
    if (n_ctx == 0 || n_ctx > 65536 || n_sym == 0 || n_sym > TF_RANS_MAX_SYMBOLS)
        return tf_fail(e, EINVAL, "rans: %u contexts x %u symbols is out of range", n_ctx, n_sym);
    if (prec < TF_RANS_MIN_PREC || prec > TF_RANS_MAX_PREC)
        return tf_fail(e, EINVAL, "rans: precision %u is out of range", prec);
    return 0;
}

/* Rounding c * total_freq / total leaves the sum off by a little; the
 * adjustment moves one unit at a time where it costs the fewest bits. The
 * cost of moving freq f of a symbol seen c times by one unit is about
 * c / (f -+ 1/2) bits (the first-order term of c * log2((f +- 1) / f)),
 * which needs no libm and is reproducible bit for bit. */
static unsigned cheapest_to_decrement(const uint64_t *count, const uint16_t *freq, unsigned n)
{
    unsigned best = n;
    double best_cost = 0;
    for (unsigned s = 0; s < n; s++) {
        if (freq[s] <= 1)
            continue;
        double cost = (double)count[s] / (freq[s] - 0.5);
        if (best == n || cost < best_cost) {
            best = s;
            best_cost = cost;
        }
    }
    return best;
}

static unsigned best_to_increment(const uint64_t *count, const uint16_t *freq, unsigned n)
{
    unsigned best = n;
    double best_gain = 0;
    for (unsigned s = 0; s < n; s++) {
        if (freq[s] == 0)
            continue;
        double gain = (double)count[s] / (freq[s] + 0.5);
        if (best == n || gain > best_gain) {
            best = s;
            best_gain = gain;
        }
    }
    return best;
}

/* Every symbol seen gets a frequency >= 1, every other 0; the sum is
 * exactly total_freq. n_sym <= total_freq, so this always succeeds. */
static void normalize_row(const uint64_t *count, unsigned n_sym, unsigned total_freq,
                          uint16_t *freq)
{
    uint64_t total = 0;
    for (unsigned s = 0; s < n_sym; s++)
        total += count[s];
    unsigned sum = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        unsigned f = 0;
        if (count[s]) {
            double scaled = (double)count[s] * total_freq / (double)total + 0.5;
            f = scaled < 1 ? 1 : scaled > total_freq ? total_freq : (unsigned)scaled;
        }
        freq[s] = (uint16_t)f;
        sum += f;
    }
    while (sum > total_freq) {
        freq[cheapest_to_decrement(count, freq, n_sym)]--;
        sum--;
    }
    while (sum < total_freq) {
        freq[best_to_increment(count, freq, n_sym)]++;
        sum++;
    }
}

static bool row_is_occupied(const uint64_t *count, unsigned n_sym)
{
    for (unsigned s = 0; s < n_sym; s++)
        if (count[s])
            return true;
    return false;
}

int tf_rans_table_fit_span(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                           const uint64_t *counts, unsigned ctx_lo, unsigned n_rows,
                           tf_error *e)
{
    if (check_shape(n_ctx, n_sym, prec, e) < 0)
        return -1;
    if (ctx_lo > n_ctx || n_rows > n_ctx - ctx_lo)
        return tf_fail(e, EINVAL, "rans: contexts [%u, %u + %u) are out of range", ctx_lo,
                       ctx_lo, n_rows);
    unsigned occupied = 0;
    for (unsigned r = 0; r < n_rows; r++)
        occupied += row_is_occupied(counts + (size_t)r * n_sym, n_sym);
    if (table_alloc(t, n_ctx, n_sym, prec, occupied, e) < 0)
        return -1;
    unsigned row = 0;
    for (unsigned r = 0; r < n_rows; r++) {
        const uint64_t *count = counts + (size_t)r * n_sym;
        if (!row_is_occupied(count, n_sym))
            continue;
        t->row_of_ctx[ctx_lo + r] = (int32_t)row;
        normalize_row(count, n_sym, 1u << prec, t->freq + (size_t)row * n_sym);
        row++;
    }
    return 0;
}

/* c log2 c for the counts below CLOG2C_SMALL, which samples and small
 * chunks count in: a lookup where there would be a log2 a symbol. */
#define CLOG2C_SMALL 4096
static double clog2c_small[CLOG2C_SMALL];
static pthread_once_t clog2c_once = PTHREAD_ONCE_INIT;

static void clog2c_init(void)
{
    for (unsigned c = 1; c < CLOG2C_SMALL; c++)
        clog2c_small[c] = c * log2(c);
}

static double clog2c(uint64_t c)
{
    return c < CLOG2C_SMALL ? clog2c_small[c] : (double)c * log2((double)c);
}

/* A row of total T holds sum c log2(T / c) = T log2 T - sum c log2 c. */
double tf_rans_entropy_bits(const uint64_t *counts, size_t n_rows, unsigned n_sym)
{
    pthread_once(&clog2c_once, clog2c_init);
    double bits = 0;
    for (size_t row = 0; row < n_rows; row++) {
        const uint64_t *c = counts + row * n_sym;
        uint64_t total = 0;
        double sum = 0;
        for (unsigned s = 0; s < n_sym; s++) {
            total += c[s];
            sum += clog2c(c[s]);
        }
        bits += clog2c(total) - sum;
    }
    return bits;
}

int tf_rans_table_fit(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                      const uint64_t *counts, tf_error *e)
{
    return tf_rans_table_fit_span(t, n_ctx, n_sym, prec, counts, 0, n_ctx, e);
}

unsigned tf_rans_table_freq(const tf_rans_table *t, unsigned ctx, unsigned sym)
{
    if (ctx >= t->n_ctx || sym >= t->n_sym || t->row_of_ctx[ctx] < 0)
        return 0;
    return t->freq[(size_t)t->row_of_ctx[ctx] * t->n_sym + sym];
}

/* Serialized table:
 *   u8 prec | varint n_rows | n_rows x row
 *   row: varint context gap (context - previous context - 1; the first
 *        row's gap is its context) | varint first symbol | varint span |
 *        span x varint freq of symbols first .. first+span-1 (0 = absent)
 * The first symbol's frequency is positive; the last symbol
 * (first + span) has the frequency left over, which must be positive. */
static int write_row(const uint16_t *freq, unsigned n_sym, unsigned gap, tf_buf *out)
{
    unsigned first = 0, last = n_sym - 1;
    while (freq[first] == 0)
        first++;
    while (freq[last] == 0)
        last--;
    int rc = tf_buf_varint(out, gap) | tf_buf_varint(out, first) |
             tf_buf_varint(out, last - first);
    for (unsigned s = first; s < last; s++)
        rc |= tf_buf_varint(out, freq[s]);
    return rc;
}

int tf_rans_table_write(const tf_rans_table *t, tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, (uint8_t)t->prec) | tf_buf_varint(out, t->n_rows);
    unsigned next_ctx = 0;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        rc |= write_row(t->freq + (size_t)t->row_of_ctx[c] * t->n_sym, t->n_sym, c - next_ctx,
                        out);
        next_ctx = c + 1;
    }
    return rc ? tf_fail(e, ENOMEM, "rans: out of memory writing a table") : 0;
}

/* tf_read_varint, with the one-byte values that make up most of a
 * table read inline (tables are read for every chunk coded). */
static inline uint64_t read_varint(tf_cursor *r)
{
    if (!r->bad && r->pos < r->len && r->p[r->pos] < 0x80)
        return r->p[r->pos++];
    return tf_read_varint(r);
}

static int read_row(tf_cursor *r, unsigned n_sym, unsigned total_freq, uint16_t *freq,
                    tf_error *e)
{
    uint64_t first = read_varint(r), span = read_varint(r);
    if (r->bad || first >= n_sym || span >= n_sym - first)
        return tf_fail(e, EIO, "rans: table row spans symbols out of range");
    uint64_t sum = 0;
    for (unsigned s = (unsigned)first; s < first + span; s++) {
        uint64_t f = read_varint(r);
        sum += f;
        if (r->bad || sum >= total_freq || (s == first && f == 0))
            return tf_fail(e, EIO, "rans: table row frequencies are invalid");
        freq[s] = (uint16_t)f;
    }
    freq[first + span] = (uint16_t)(total_freq - sum);
    return 0;
}

int tf_rans_table_read(tf_rans_table *t, tf_cursor *r, unsigned n_ctx, unsigned n_sym,
                       tf_error *e)
{
    unsigned prec = tf_read_u8(r);
    uint64_t n_rows = tf_read_varint(r);
    if (r->bad)
        return tf_fail(e, EIO, "rans: table header is truncated");
    if (check_shape(n_ctx, n_sym, TF_RANS_MIN_PREC, e) < 0)
        return -1;
    if (prec < TF_RANS_MIN_PREC || prec > TF_RANS_MAX_PREC)
        return tf_fail(e, EIO, "rans: table precision %u is out of range", prec);
    /* A row takes at least 3 bytes: no allocation the input did not pay for. */
    if (n_rows > n_ctx || n_rows > tf_cursor_left(r) / 3)
        return tf_fail(e, EIO, "rans: table claims %llu rows", (unsigned long long)n_rows);
    if (table_alloc(t, n_ctx, n_sym, prec, (unsigned)n_rows, e) < 0)
        return -1;
    uint64_t ctx = 0;
    for (unsigned row = 0; row < n_rows; row++) {
        ctx += read_varint(r);
        if (r->bad || ctx >= n_ctx) {
            tf_rans_table_free(t);
            return tf_fail(e, EIO, "rans: table row has a context out of range");
        }
        t->row_of_ctx[ctx] = (int32_t)row;
        if (read_row(r, n_sym, 1u << prec, t->freq + (size_t)row * n_sym, e) < 0) {
            tf_rans_table_free(t);
            return -1;
        }
        ctx++;
    }
    return 0;
}
