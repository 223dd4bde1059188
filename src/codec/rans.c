#include "codec/rans.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables ---- */

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

double tf_rans_entropy_bits(const uint64_t *counts, size_t n_rows, unsigned n_sym)
{
    double bits = 0;
    for (size_t row = 0; row < n_rows; row++) {
        const uint64_t *c = counts + row * n_sym;
        uint64_t total = 0;
        for (unsigned s = 0; s < n_sym; s++)
            total += c[s];
        for (unsigned s = 0; s < n_sym; s++)
            if (c[s])
                bits += (double)c[s] * log2((double)total / (double)c[s]);
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
static inline uint64_t read_varint(tf_reader *r)
{
    if (!r->bad && r->pos < r->len && r->p[r->pos] < 0x80)
        return r->p[r->pos++];
    return tf_read_varint(r);
}

static int read_row(tf_reader *r, unsigned n_sym, unsigned total_freq, uint16_t *freq,
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

int tf_rans_table_read(tf_rans_table *t, tf_reader *r, unsigned n_ctx, unsigned n_sym,
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
    if (n_rows > n_ctx || n_rows > tf_reader_left(r) / 3)
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

/* ---- encoder ---- */

/* Division by freq without a divide: for x < 2^32 and l = ceil(log2 f),
 * m = ceil(2^(32+l) / f) gives floor(x / f) = floor(x * m / 2^(32+l)):
 * the excess x * (m - 2^(32+l) / f) / 2^(32+l) is below 2^-l <= 1 / f,
 * too little to carry x / f past the next integer. m lies in
 * [2^32, 2^33), so only rcp = m - 2^32 is stored, and x * m / 2^32 is
 * x + (x * rcp >> 32) (exact in the floor, as x is an integer). */
static tf_rans_enc_sym make_enc_sym(unsigned freq, unsigned cum, unsigned prec)
{
    unsigned l = freq > 1 ? 32 - (unsigned)__builtin_clz(freq - 1) : 0; /* ceil(log2 freq) */
    uint64_t m = ((1ull << (32 + l)) + freq - 1) / freq;
    return (tf_rans_enc_sym){
        .x_lim = (uint32_t)(((uint64_t)freq << (32 - prec)) - 1),
        .rcp = (uint32_t)(m - (1ull << 32)),
        .freq = (uint16_t)freq,
        .cum = (uint16_t)cum,
        .cmpl = (uint16_t)((1u << prec) - freq),
        .shift = (uint8_t)l,
    };
}

int tf_rans_encoder_init(tf_rans_encoder *enc, const tf_rans_table *t, tf_error *e)
{
    *enc = (tf_rans_encoder){ .n_ctx = t->n_ctx, .n_sym = t->n_sym };
    enc->row_of_ctx = malloc(t->n_ctx * sizeof *enc->row_of_ctx);
    enc->sym = calloc(((size_t)t->n_rows + 1) * t->n_sym, sizeof *enc->sym);
    if (!enc->row_of_ctx || !enc->sym) {
        tf_rans_encoder_free(enc);
        return tf_fail(e, ENOMEM, "rans: out of memory for an encoder");
    }
    const tf_rans_enc_sym *zero_row = enc->sym + (size_t)t->n_rows * t->n_sym;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        int32_t row = t->row_of_ctx[c];
        enc->row_of_ctx[c] = row < 0 ? zero_row : enc->sym + (size_t)row * t->n_sym;
    }
    for (size_t row = 0; row < t->n_rows; row++) {
        const uint16_t *freq = t->freq + row * t->n_sym;
        unsigned cum = 0;
        for (unsigned s = 0; s < t->n_sym; s++) {
            if (freq[s]) /* an absent symbol keeps freq 0 */
                enc->sym[row * t->n_sym + s] = make_enc_sym(freq[s], cum, t->prec);
            cum += freq[s];
        }
    }
    return 0;
}

void tf_rans_encoder_free(tf_rans_encoder *enc)
{
    free(enc->row_of_ctx);
    free(enc->sym);
    *enc = (tf_rans_encoder){ 0 };
}

/* Encodes one symbol into a lane state, writing a renormalization word
 * just below *w when needed. Branch-free, like the decoder; the word is
 * stored even when not kept (the space below *w is reserved). A symbol
 * with freq 0 leaves the state unchanged but for a renormalization. */
static inline uint32_t enc_put(uint32_t x, const tf_rans_enc_sym *s, uint8_t **w)
{
    uint32_t emit = x > s->x_lim;
    (*w)[-2] = (uint8_t)x;
    (*w)[-1] = (uint8_t)(x >> 8);
    *w -= 2 * emit;
    x >>= 16 * emit;
    uint32_t q = (uint32_t)(((uint64_t)x + ((uint64_t)x * s->rcp >> 32)) >> s->shift);
    return x + s->cum + q * s->cmpl;
}

/* The coding entry of symbol i; its freq is 0 when the table cannot code
 * it. */
static inline const tf_rans_enc_sym *enc_entry(const tf_rans_encoder *enc, const uint16_t *ctx,
                                               const uint8_t *sym, size_t i)
{
    static const tf_rans_enc_sym uncodable = { 0 };
    unsigned c = ctx ? ctx[i] : 0;
    if (c >= enc->n_ctx || sym[i] >= enc->n_sym)
        return &uncodable;
    return &enc->row_of_ctx[c][sym[i]];
}

/* Symbols are encoded last to first so that they decode first to last;
 * words go downwards from *words. Returns whether every symbol was
 * codable. Instantiated per lane count. */
static inline __attribute__((always_inline)) bool
encode_backwards_lanes(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                       size_t n, uint32_t *x, uint8_t **words, unsigned lanes)
{
    uint32_t codable = 1;
    uint8_t *w = *words;
    for (size_t i = n; i-- > 0;) {
        const tf_rans_enc_sym *s = enc_entry(enc, ctx, sym, i);
        codable &= s->freq != 0;
        x[i % lanes] = enc_put(x[i % lanes], s, &w);
    }
    *words = w;
    return codable;
}

static bool encode_backwards(const tf_rans_encoder *enc, const uint16_t *ctx,
                             const uint8_t *sym, size_t n, uint32_t *x, uint8_t **words,
                             unsigned lanes)
{
    switch (lanes) {
    case 1: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 1);
    case 2: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 2);
    case 4: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 4);
    case 8: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 8);
    default: return encode_backwards_lanes(enc, ctx, sym, n, x, words, 16);
    }
}

/* LEB128, as tf_buf_varint writes it; returns the bytes written. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

static int fail_uncodable(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                          size_t n, tf_error *e)
{
    size_t i = 0;
    while (i < n && enc_entry(enc, ctx, sym, i)->freq)
        i++;
    return tf_fail(e, EINVAL, "rans: symbol %u at %zu has no frequency under context %u",
                   i < n ? sym[i] : 0, i, ctx && i < n ? ctx[i] : 0);
}

/* A stream under construction: each symbol renormalizes at most once
 * (prec <= 16), so its words fit in 2n bytes; they are written downwards
 * from the top of a reservation and moved down behind the header once its
 * length is known. Below the words, the header's space doubles as slack
 * for the vector encoder's 16-byte stores. */
#define STREAM_HEAD_MAX (10 + 1 + 4 * TF_RANS_MAX_LANES)

typedef struct {
    uint8_t *base, *top;
    uint32_t x[TF_RANS_MAX_LANES];
} stream_writer;

static int stream_begin(stream_writer *sw, size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    if (!tf_rans_lanes_valid(lanes))
        return tf_fail(e, EINVAL, "rans: %u lanes is not a power of two up to %d", lanes,
                       TF_RANS_MAX_LANES);
    if (n > (SIZE_MAX - STREAM_HEAD_MAX) / 2)
        return tf_fail(e, ENOMEM, "rans: %zu symbols is too many", n);
    sw->base = tf_buf_reserve(out, STREAM_HEAD_MAX + 2 * n);
    if (!sw->base)
        return tf_fail(e, ENOMEM, "rans: out of memory for a stream");
    sw->top = sw->base + STREAM_HEAD_MAX + 2 * n;
    for (unsigned l = 0; l < TF_RANS_MAX_LANES; l++)
        sw->x[l] = TF_RANS_L;
    return 0;
}

/* Writes the header before the words (which start at `words`). */
static void stream_end(const stream_writer *sw, const uint8_t *words, unsigned lanes,
                       tf_buf *out)
{
    size_t words_len = (size_t)(sw->top - words);
    uint8_t *p = sw->base + put_varint(sw->base, 1 + 4 * lanes + words_len);
    *p++ = (uint8_t)lanes;
    for (unsigned l = 0; l < lanes; l++, p += 4)
        tf_le32_put(p, sw->x[l]);
    memmove(p, words, words_len);
    tf_buf_commit(out, (size_t)(p - sw->base) + words_len);
}

int tf_rans_encode(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                   size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    stream_writer sw;
    if (stream_begin(&sw, n, lanes, out, e) < 0)
        return -1;
    uint8_t *words = sw.top;
    if (!encode_backwards(enc, ctx, sym, n, sw.x, &words, lanes))
        return fail_uncodable(enc, ctx, sym, n, e);
    stream_end(&sw, words, lanes, out);
    return 0;
}

/* ---- indexed encoder ----
 * An entry packs a symbol's coding parameters (make_enc_sym):
 *   bits  0-31  rcp
 *   bits 32-35  shift
 *   bits 36-46  cum
 *   bits 52-63  freq
 * and is 0 for a symbol without frequency. */

static uint64_t pack_entry(unsigned freq, unsigned cum, unsigned prec)
{
    tf_rans_enc_sym s = make_enc_sym(freq, cum, prec);
    return (uint64_t)s.rcp | (uint64_t)((uint32_t)freq << 20 | cum << 4 | s.shift) << 32;
}

void tf_rans_indexed_free(tf_rans_indexed *ix)
{
    free(ix->entry);
    *ix = (tf_rans_indexed){ 0 };
}

int tf_rans_indexed_init(tf_rans_indexed *ix, const tf_rans_table *t, unsigned sym_bits,
                         tf_error *e)
{
    *ix = (tf_rans_indexed){ .prec = t->prec, .sym_bits = sym_bits };
    unsigned lo = 0, end = 0; /* occupied contexts: [lo, end) */
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        if (end == 0)
            lo = c;
        end = c + 1;
    }
    ix->ctx_lo = lo;
    ix->n_rows = end - lo;
    if (sym_bits > 8 || t->n_sym > 1u << sym_bits ||
        ((size_t)ix->n_rows + 1) << sym_bits > 65536)
        return tf_fail(e, EINVAL, "rans: %u contexts x %u symbols do not fit 16-bit indexes",
                       ix->n_rows, t->n_sym);
    ix->entry = calloc(((size_t)ix->n_rows + 1) << sym_bits, sizeof *ix->entry);
    if (!ix->entry)
        return tf_fail(e, ENOMEM, "rans: out of memory for an encoder");
    for (unsigned c = lo; c < end; c++) {
        if (t->row_of_ctx[c] < 0)
            continue;
        const uint16_t *freq = t->freq + (size_t)t->row_of_ctx[c] * t->n_sym;
        uint64_t *row = ix->entry + ((size_t)(c - lo) << sym_bits);
        unsigned cum = 0;
        for (unsigned s = 0; s < t->n_sym; s++) {
            if (freq[s])
                row[s] = pack_entry(freq[s], cum, t->prec);
            cum += freq[s];
        }
    }
    return 0;
}

/* enc_put from a packed entry. Every step stays within 32 bits: after
 * renormalization x < freq << (32 - prec), so x / freq < 2^(32 - prec)
 * and x + (x * rcp >> 32), whose top (32 - prec) + shift bits are that
 * quotient, is below 2^(32 - prec + shift) <= 2^32 (shift <= prec). */
static inline uint32_t put_packed(uint32_t x, uint64_t entry, unsigned prec, uint8_t **w)
{
    uint32_t hi = (uint32_t)(entry >> 32), freq = hi >> 20;
    uint32_t emit = (x >> (32 - prec)) >= freq;
    (*w)[-2] = (uint8_t)x;
    (*w)[-1] = (uint8_t)(x >> 8);
    *w -= 2 * emit;
    x >>= 16 * emit;
    uint32_t q = (x + (uint32_t)((uint64_t)x * (uint32_t)entry >> 32)) >> (hi & 15);
    return x + (hi >> 4 & 0x7ff) + q * ((1u << prec) - freq);
}

/* Symbols [from, to) backwards, one lane each in turn; returns whether
 * all were codable. (A state that runs wild after an uncodable symbol is
 * harmless: the stream is discarded.) */
static bool put_range(const tf_rans_indexed *ix, const uint16_t *idx, size_t from, size_t to,
                      uint32_t *lane_x, unsigned lanes, uint8_t **words)
{
    /* Local copies: stores of bytes through w could alias *words and
     * lane_x, which would then go back to memory after each one. */
    uint32_t x[TF_RANS_MAX_LANES];
    uint8_t *w = *words;
    memcpy(x, lane_x, sizeof x);
    bool codable = true;
    for (size_t i = to; i-- > from;) {
        uint64_t entry = ix->entry[idx[i]];
        codable &= entry != 0;
        x[i & (lanes - 1)] = put_packed(x[i & (lanes - 1)], entry, ix->prec, &w);
    }
    memcpy(lane_x, x, sizeof x);
    *words = w;
    return codable;
}

#ifdef TF_X86_SIMD
#define RANS_AVX2 static inline __attribute__((always_inline, target("avx2,popcnt")))

/* For each mask of renormalizing lanes (bit l: lane l of eight), the
 * permutation that moves those lanes to the top of the vector in lane
 * order: their words, stored just below the words written so far, land
 * exactly where the scalar encoder puts them. Entry p of mask m is the
 * lane with (number of lanes of m) - (8 - p) lanes of m below it, any
 * lane (0) for positions below those. A constant table, so that no call
 * builds it. */
#define TT_BIT(m, l) ((m) >> (l) & 1)
#define TT_COUNT(m) \
    (TT_BIT(m, 0) + TT_BIT(m, 1) + TT_BIT(m, 2) + TT_BIT(m, 3) + TT_BIT(m, 4) + TT_BIT(m, 5) + \
     TT_BIT(m, 6) + TT_BIT(m, 7))
/* the lane of the k-th (from 0) set bit of m, 0 when there is none */
#define TT_IS(m, k, l) (TT_BIT(m, l) && TT_COUNT((m) & ((1u << (l)) - 1)) == (k))
#define TT_NTH(m, k)                                                                      \
    (TT_IS(m, k, 1) * 1 + TT_IS(m, k, 2) * 2 + TT_IS(m, k, 3) * 3 + TT_IS(m, k, 4) * 4 + \
     TT_IS(m, k, 5) * 5 + TT_IS(m, k, 6) * 6 + TT_IS(m, k, 7) * 7)
#define TT(m, p) ((p) + TT_COUNT(m) >= 8 ? TT_NTH(m, (p) + TT_COUNT(m) - 8) : 0)
#define TT_ROW(m) \
    { TT(m, 0), TT(m, 1), TT(m, 2), TT(m, 3), TT(m, 4), TT(m, 5), TT(m, 6), TT(m, 7) },
#define TT_ROWS4(m) TT_ROW(m) TT_ROW((m) + 1) TT_ROW((m) + 2) TT_ROW((m) + 3)
#define TT_ROWS16(m) TT_ROWS4(m) TT_ROWS4((m) + 4) TT_ROWS4((m) + 8) TT_ROWS4((m) + 12)
#define TT_ROWS64(m) TT_ROWS16(m) TT_ROWS16((m) + 16) TT_ROWS16((m) + 32) TT_ROWS16((m) + 48)
static const int32_t avx2_to_top[256][8] = {
    TT_ROWS64(0) TT_ROWS64(64) TT_ROWS64(128) TT_ROWS64(192)
};

/* The high 32 bits of x * rcp, lane by lane. */
RANS_AVX2 __m256i avx2_mulhi(__m256i x, __m256i rcp)
{
    __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(x, rcp), 32);
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(rcp, 32));
    return _mm256_blend_epi32(even, odd, 0xaa);
}

/* put_packed for eight lanes, symbols idx[0..8). Returns the lanes'
 * entries' top halves (for the codability check). */
RANS_AVX2 __m256i avx2_put8(__m256i *x, const uint16_t *idx, const uint64_t *entry,
                            unsigned prec, uint8_t **w)
{
    __m256i i = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)idx));
    const long long *table = (const long long *)entry;
    __m256i e0 = _mm256_i32gather_epi64(table, _mm256_castsi256_si128(i), 8);
    __m256i e1 = _mm256_i32gather_epi64(table, _mm256_extracti128_si256(i, 1), 8);
    const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    e0 = _mm256_permutevar8x32_epi32(e0, split); /* rcp 0-3 | hi 0-3 */
    e1 = _mm256_permutevar8x32_epi32(e1, split); /* rcp 4-7 | hi 4-7 */
    __m256i rcp = _mm256_permute2x128_si256(e0, e1, 0x20);
    __m256i hi = _mm256_permute2x128_si256(e0, e1, 0x31);
    __m256i freq = _mm256_srli_epi32(hi, 20);
    /* freq > x >> (32 - prec): no renormalization (both below 2^12) */
    __m256i stay = _mm256_cmpgt_epi32(freq, _mm256_srli_epi32(*x, (int)(32 - prec)));
    unsigned emit = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(stay)) & 0xff;
    __m256i words = _mm256_permutevar8x32_epi32(
        *x, _mm256_loadu_si256((const __m256i *)avx2_to_top[emit]));
    const __m256i low_halves = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    words = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, low_halves), 0x08);
    _mm_storeu_si128((__m128i *)(*w - 16), _mm256_castsi256_si128(words));
    *w -= 2 * (unsigned)_mm_popcnt_u32(emit);
    __m256i v = _mm256_blendv_epi8(_mm256_srli_epi32(*x, 16), *x, stay);
    __m256i q = _mm256_srlv_epi32(_mm256_add_epi32(v, avx2_mulhi(v, rcp)),
                                  _mm256_and_si256(hi, _mm256_set1_epi32(15)));
    __m256i cum = _mm256_and_si256(_mm256_srli_epi32(hi, 4), _mm256_set1_epi32(0x7ff));
    __m256i cmpl = _mm256_sub_epi32(_mm256_set1_epi32(1 << prec), freq);
    *x = _mm256_add_epi32(_mm256_add_epi32(v, cum), _mm256_mullo_epi32(q, cmpl));
    return hi;
}

/* Whole rounds of 16 symbols [0, rounds * 16), backwards; lanes 8-15
 * of a round go first, as in the scalar loop. */
__attribute__((target("avx2,popcnt"))) static uint32_t
avx2_put_rounds(const tf_rans_indexed *ix, const uint16_t *idx, size_t rounds, uint32_t *x,
                uint8_t **words)
{
    __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 8));
    __m256i all = _mm256_set1_epi32(-1);
    uint8_t *w = *words;
    for (size_t r = rounds; r-- > 0;) {
        all = _mm256_min_epu32(all, avx2_put8(&x1, idx + 16 * r + 8, ix->entry, ix->prec, &w));
        all = _mm256_min_epu32(all, avx2_put8(&x0, idx + 16 * r, ix->entry, ix->prec, &w));
    }
    _mm256_storeu_si256((__m256i *)x, x0);
    _mm256_storeu_si256((__m256i *)(x + 8), x1);
    *words = w;
    /* codable: every entry's freq (the top 12 bits) is positive */
    __m128i m = _mm_min_epu32(_mm256_castsi256_si128(all), _mm256_extracti128_si256(all, 1));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(m) >> 20;
}
#endif

int tf_rans_encode_indexed(const tf_rans_indexed *ix, const uint16_t *idx, size_t n,
                           unsigned lanes, tf_buf *out, tf_error *e)
{
    stream_writer sw;
    if (stream_begin(&sw, n, lanes, out, e) < 0)
        return -1;
    uint8_t *words = sw.top;
    size_t vector_end = 0; /* symbols below it go to the vector loop */
#ifdef TF_X86_SIMD
    if (lanes == 16 && n >= 64 && tf_simd_level_get() >= TF_SIMD_AVX2)
        vector_end = n & ~(size_t)15;
#endif
    bool codable = put_range(ix, idx, vector_end, n, sw.x, lanes, &words);
#ifdef TF_X86_SIMD
    if (vector_end)
        codable &= avx2_put_rounds(ix, idx, vector_end / 16, sw.x, &words) != 0;
#endif
    if (!codable) {
        size_t i = 0;
        while (i < n && ix->entry[idx[i]])
            i++;
        return tf_fail(e, EINVAL, "rans: symbol index %u at %zu has no frequency",
                       i < n ? idx[i] : 0, i);
    }
    stream_end(&sw, words, lanes, out);
    return 0;
}

/* ---- decoder ---- */

void tf_rans_decoder_free(tf_rans_decoder *dec)
{
    free(dec->slots_of_ctx);
    free(dec->slots);
    *dec = (tf_rans_decoder){ 0 };
}

static void build_slots(const uint16_t *freq, unsigned n_sym, uint32_t *slots)
{
    unsigned cum = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        for (unsigned k = 0; k < freq[s]; k++)
            slots[cum + k] = s | (uint32_t)k << 8 | (uint32_t)freq[s] << 20;
        cum += freq[s];
    }
}

void tf_rans_row_slots(const tf_rans_table *t, unsigned ctx, uint32_t *slots)
{
    if (ctx < t->n_ctx && t->row_of_ctx[ctx] >= 0)
        build_slots(t->freq + (size_t)t->row_of_ctx[ctx] * t->n_sym, t->n_sym, slots);
    else
        memset(slots, 0, sizeof *slots << t->prec);
}

static int count_rows_to_build(const tf_rans_table *t, const uint8_t *used, unsigned *n,
                               tf_error *e)
{
    *n = 0;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if (used && !used[c])
            continue;
        if (t->row_of_ctx[c] >= 0)
            (*n)++;
        else if (used)
            return tf_fail(e, EIO, "rans: context %u is used but has no table row", c);
    }
    return 0;
}

int tf_rans_decoder_init(tf_rans_decoder *dec, const tf_rans_table *t, const uint8_t *used,
                         bool dense, tf_error *e)
{
    *dec = (tf_rans_decoder){ .n_ctx = t->n_ctx, .prec = t->prec };
    unsigned n_build;
    if (count_rows_to_build(t, used, &n_build, e) < 0)
        return -1;
    size_t row_slots = (size_t)1 << t->prec;
    size_t n_slots = dense ? (size_t)t->n_ctx << t->prec : n_build * row_slots;
    dec->slots_of_ctx = calloc(t->n_ctx, sizeof *dec->slots_of_ctx);
    dec->slots = malloc((n_slots + 1) * sizeof *dec->slots);
    if (!dec->slots_of_ctx || !dec->slots) {
        tf_rans_decoder_free(dec);
        return tf_fail(e, ENOMEM, "rans: out of memory for a decoder");
    }
    uint32_t *next = dec->slots;
    for (unsigned c = 0; c < t->n_ctx; c++) {
        if ((used && !used[c]) || t->row_of_ctx[c] < 0)
            continue;
        uint32_t *row = dense ? dec->slots + ((size_t)c << t->prec) : next;
        build_slots(t->freq + (size_t)t->row_of_ctx[c] * t->n_sym, t->n_sym, row);
        dec->slots_of_ctx[c] = row;
        next += row_slots;
    }
    return 0;
}

int tf_rans_stream_open(tf_rans_stream *s, tf_reader *r, tf_error *e)
{
    uint64_t len = tf_read_varint(r);
    if (r->bad || len < 1 || len > tf_reader_left(r))
        return tf_fail(e, EIO, "rans: stream length is invalid or truncated");
    const uint8_t *p = tf_read_bytes(r, (size_t)len);
    unsigned lanes = p[0];
    if (!tf_rans_lanes_valid(lanes) || len < 1 + 4 * lanes || (len - 1 - 4 * lanes) % 2)
        return tf_fail(e, EIO, "rans: stream header is invalid");
    for (unsigned l = 0; l < lanes; l++) {
        s->x[l] = tf_le32_get(p + 1 + 4 * l);
        if (s->x[l] < TF_RANS_L)
            return tf_fail(e, EIO, "rans: lane %u starts in an impossible state", l);
    }
    s->lanes = lanes;
    s->p = p + 1 + 4 * lanes;
    s->end = p + len;
    s->bad = false;
    return 0;
}

int tf_rans_stream_close(const tf_rans_stream *s, tf_error *e)
{
    if (s->bad)
        return tf_fail(e, EIO, "rans: stream ended early");
    if (s->p != s->end)
        return tf_fail(e, EIO, "rans: %zu stream bytes left over", (size_t)(s->end - s->p));
    for (unsigned l = 0; l < s->lanes; l++)
        if (s->x[l] != TF_RANS_L)
            return tf_fail(e, EIO, "rans: lane %u did not end in its initial state", l);
    return 0;
}

/* Fails on the first context of ctx[0..n) (all 0 when ctx is NULL) that
 * has no decoding slots. */
static int check_contexts(const tf_rans_decoder *dec, const uint16_t *ctx, size_t n,
                          tf_error *e)
{
    if (!ctx)
        return tf_rans_slots(dec, 0) || n == 0
                   ? 0 : tf_fail(e, EIO, "rans: context 0 has no table row");
    for (size_t i = 0; i < n; i++)
        if (!tf_rans_slots(dec, ctx[i]))
            return tf_fail(e, EIO, "rans: context %u at %zu has no table row", ctx[i], i);
    return 0;
}

int tf_rans_decode(const tf_rans_decoder *dec, tf_reader *r, const uint16_t *ctx,
                   uint8_t *sym, size_t n, tf_error *e)
{
    tf_rans_stream s;
    if (check_contexts(dec, ctx, n, e) < 0 || tf_rans_stream_open(&s, r, e) < 0)
        return -1;
    const unsigned prec = dec->prec, lanes = s.lanes;
    size_t i = 0;
    for (; i + lanes <= n && tf_rans_words_suffice(&s, lanes); i += lanes)
        for (unsigned l = 0; l < lanes; l++)
            sym[i + l] = (uint8_t)tf_rans_get_fast(
                &s, l, tf_rans_slots(dec, ctx ? ctx[i + l] : 0), prec);
    for (; i < n; i++)
        sym[i] = (uint8_t)tf_rans_get_checked(
            &s, (unsigned)(i % lanes), tf_rans_slots(dec, ctx ? ctx[i] : 0), prec);
    return tf_rans_stream_close(&s, e);
}

/* ---- decoding into rows of dense slots ---- */

#ifdef TF_X86_SIMD
#define WL_BIT(m, l) ((m) >> (l) & 1)
#define WL_BEFORE(m, l) \
    ((l) > 0 && WL_BIT(m, 0)) + ((l) > 1 && WL_BIT(m, 1)) + ((l) > 2 && WL_BIT(m, 2)) + \
        ((l) > 3 && WL_BIT(m, 3)) + ((l) > 4 && WL_BIT(m, 4)) + ((l) > 5 && WL_BIT(m, 5)) + \
        ((l) > 6 && WL_BIT(m, 6))
#define WL(m, l) (WL_BIT(m, l) ? WL_BEFORE(m, l) : 0)
#define WL_ROW(m) \
    { WL(m, 0), WL(m, 1), WL(m, 2), WL(m, 3), WL(m, 4), WL(m, 5), WL(m, 6), WL(m, 7) },
#define WL_ROWS4(m) WL_ROW(m) WL_ROW((m) + 1) WL_ROW((m) + 2) WL_ROW((m) + 3)
#define WL_ROWS16(m) WL_ROWS4(m) WL_ROWS4((m) + 4) WL_ROWS4((m) + 8) WL_ROWS4((m) + 12)
#define WL_ROWS64(m) WL_ROWS16(m) WL_ROWS16((m) + 16) WL_ROWS16((m) + 32) WL_ROWS16((m) + 48)
const int32_t tf_rans_avx2_word_lane[256][8] = {
    WL_ROWS64(0) WL_ROWS64(64) WL_ROWS64(128) WL_ROWS64(192)
};

/* One step of eight lanes (states *x, rows `row`): stores their symbols,
 * folds their slots into *min_slot, renormalizes from *words in lane
 * order as tf_rans_renorm_fast does lane by lane. */
RANS_AVX2 void avx2_dense_step(__m256i *x, __m256i row, const uint32_t *slots, unsigned prec,
                               const uint8_t **words, __m256i *min_slot, uint32_t *sym)
{
    const __m256i low = _mm256_set1_epi32((int)((1u << prec) - 1));
    __m128i count = _mm_cvtsi32_si128((int)prec);
    __m256i index = _mm256_or_si256(_mm256_sll_epi32(row, count), _mm256_and_si256(*x, low));
    __m256i slot = _mm256_i32gather_epi32((const int *)slots, index, 4);
    __m256i freq = _mm256_srli_epi32(slot, 20);
    __m256i bias = _mm256_and_si256(_mm256_srli_epi32(slot, 8), _mm256_set1_epi32(0xfff));
    __m256i next = _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srl_epi32(*x, count)), bias);
    *min_slot = _mm256_min_epu32(*min_slot, slot);
    _mm256_storeu_si256((__m256i *)sym, _mm256_and_si256(slot, _mm256_set1_epi32(0xff)));
    __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(next, 16), _mm256_setzero_si256());
    unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
    __m256i word = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)*words));
    word = _mm256_permutevar8x32_epi32(
        word, _mm256_loadu_si256((const __m256i *)tf_rans_avx2_word_lane[mask]));
    *words += 2 * (unsigned)_mm_popcnt_u32(mask);
    *x = _mm256_blendv_epi8(next, _mm256_or_si256(_mm256_slli_epi32(next, 16), word), need);
}

RANS_AVX2 __m256i avx2_rows(const uint32_t *ctx, __m256i lo, __m256i n_rows)
{
    __m256i c = _mm256_loadu_si256((const __m256i *)ctx);
    return _mm256_min_epu32(_mm256_sub_epi32(c, lo), n_rows);
}

/* The 16 lanes of a stream in two groups of eight, in registers. */
typedef struct {
    __m256i x0, x1;
    const uint8_t *words;
} avx2_lanes;

RANS_AVX2 avx2_lanes avx2_lanes_load(const tf_rans_stream *s)
{
    return (avx2_lanes){ _mm256_loadu_si256((const __m256i *)s->x),
                         _mm256_loadu_si256((const __m256i *)(s->x + 8)), s->p };
}

RANS_AVX2 void avx2_lanes_store(const avx2_lanes *l, tf_rans_stream *s)
{
    _mm256_storeu_si256((__m256i *)s->x, l->x0);
    _mm256_storeu_si256((__m256i *)(s->x + 8), l->x1);
    s->p = l->words;
}

/* Whether a round cannot run out of words (it reads at most 32 bytes). */
RANS_AVX2 bool avx2_room(const avx2_lanes *l, const tf_rans_stream *s)
{
    return (size_t)(s->end - l->words) >= 32;
}

/* A round of 16 symbols, rows from ctx (NULL: row 0). */
RANS_AVX2 void avx2_round(avx2_lanes *l, const uint32_t *slots, unsigned prec,
                          const uint32_t *ctx, __m256i lo, __m256i n, __m256i *least,
                          uint32_t *sym)
{
    __m256i row0 = _mm256_setzero_si256(), row1 = row0;
    if (ctx) {
        row0 = avx2_rows(ctx, lo, n);
        row1 = avx2_rows(ctx + 8, lo, n);
    }
    avx2_dense_step(&l->x0, row0, slots, prec, &l->words, least, sym);
    avx2_dense_step(&l->x1, row1, slots, prec, &l->words, least, sym + 8);
}

RANS_AVX2 void avx2_fold_min(__m256i least, uint32_t *min_slot)
{
    uint32_t m[8];
    _mm256_storeu_si256((__m256i *)m, least);
    for (unsigned l = 0; l < 8; l++)
        *min_slot = m[l] < *min_slot ? m[l] : *min_slot;
}

/* Whole turns (a round of each stream) from the first stream's lane 0
 * while the words suffice; return the symbols decoded. With two streams,
 * four independent dependency chains (a gather, a multiply, the
 * renormalization) overlap their latencies. */
__attribute__((target("avx2,popcnt"))) static size_t
avx2_turns_1(tf_rans_stream *s, const uint32_t *slots, unsigned prec, const uint32_t *ctx,
             uint32_t ctx_lo, uint32_t n_rows, uint32_t *sym, size_t count, uint32_t *min_slot)
{
    const __m256i lo = _mm256_set1_epi32((int)ctx_lo), n = _mm256_set1_epi32((int)n_rows);
    __m256i least = _mm256_set1_epi32(-1);
    avx2_lanes a = avx2_lanes_load(&s[0]);
    size_t i = 0;
    for (; i + 16 <= count && avx2_room(&a, &s[0]); i += 16)
        avx2_round(&a, slots, prec, ctx ? ctx + i : NULL, lo, n, &least, sym + i);
    avx2_lanes_store(&a, &s[0]);
    avx2_fold_min(least, min_slot);
    return i;
}

__attribute__((target("avx2,popcnt"))) static size_t
avx2_turns_2(tf_rans_stream *s, const uint32_t *slots, unsigned prec, const uint32_t *ctx,
             uint32_t ctx_lo, uint32_t n_rows, uint32_t *sym, size_t count, uint32_t *min_slot)
{
    const __m256i lo = _mm256_set1_epi32((int)ctx_lo), n = _mm256_set1_epi32((int)n_rows);
    __m256i least = _mm256_set1_epi32(-1);
    avx2_lanes a = avx2_lanes_load(&s[0]), b = avx2_lanes_load(&s[1]);
    size_t i = 0;
    for (; i + 32 <= count && avx2_room(&a, &s[0]) && avx2_room(&b, &s[1]); i += 32) {
        avx2_round(&a, slots, prec, ctx ? ctx + i : NULL, lo, n, &least, sym + i);
        avx2_round(&b, slots, prec, ctx ? ctx + i + 16 : NULL, lo, n, &least, sym + i + 16);
    }
    avx2_lanes_store(&a, &s[0]);
    avx2_lanes_store(&b, &s[1]);
    avx2_fold_min(least, min_slot);
    return i;
}
#endif

/* Symbol i of k streams, never reading past the words. */
static inline uint32_t dense_checked(tf_rans_stream *s, unsigned k, uint64_t i,
                                     const uint32_t *row, unsigned prec, uint32_t *min_slot)
{
    const unsigned lanes = s[0].lanes, lane = (unsigned)(i & (lanes - 1));
    tf_rans_stream *st = &s[(i / lanes) % k];
    uint32_t x = st->x[lane], slot = tf_rans_step_slot(&x, row, prec);
    tf_rans_renorm_checked(st, lane, x);
    *min_slot = slot < *min_slot ? slot : *min_slot;
    return slot & 0xff;
}

static bool words_suffice(const tf_rans_stream *s, unsigned k)
{
    bool enough = true;
    for (unsigned t = 0; t < k; t++)
        enough &= tf_rans_words_suffice(&s[t], s[t].lanes);
    return enough;
}

bool tf_rans_decode_rows(tf_rans_stream *s, unsigned k, uint64_t at, const uint32_t *slots,
                         unsigned prec, const uint32_t *ctx, uint32_t ctx_lo, uint32_t n_rows,
                         uint32_t *sym, size_t count, tf_simd_level simd)
{
    const unsigned lanes = s[0].lanes, turn = k * lanes;
    uint32_t min_slot = UINT32_MAX;
#define ROW(j)                                                                          \
    (slots + (ctx ? (size_t)(ctx[j] - ctx_lo < n_rows ? ctx[j] - ctx_lo : n_rows) << prec \
                  : 0))
    size_t j = 0;
    for (; j < count && (at + j) % turn; j++) /* up to the first stream's lane 0 */
        sym[j] = dense_checked(s, k, at + j, ROW(j), prec, &min_slot);
#ifdef TF_X86_SIMD
    if (lanes == 16 && simd >= TF_SIMD_AVX2)
        j += (k == 2 ? avx2_turns_2 : avx2_turns_1)(s, slots, prec, ctx ? ctx + j : NULL, ctx_lo,
                                                    n_rows, sym + j, count - j, &min_slot);
#endif
    for (; j + turn <= count && words_suffice(s, k); j += turn)
        for (unsigned t = 0; t < k; t++)
            for (unsigned l = 0; l < lanes; l++) {
                size_t i = j + t * lanes + l;
                uint32_t x = s[t].x[l], slot = tf_rans_step_slot(&x, ROW(i), prec);
                tf_rans_renorm_fast(&s[t], l, x);
                min_slot = slot < min_slot ? slot : min_slot;
                sym[i] = slot & 0xff;
            }
    for (; j < count; j++)
        sym[j] = dense_checked(s, k, at + j, ROW(j), prec, &min_slot);
#undef ROW
    /* every slot of a present row has a positive frequency in bits 20.. */
    return count == 0 || min_slot >> 20;
}
