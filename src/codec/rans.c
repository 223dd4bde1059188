#include "codec/rans.h"

#include <errno.h>
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

int tf_rans_table_fit(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                      const uint64_t *counts, tf_error *e)
{
    if (check_shape(n_ctx, n_sym, prec, e) < 0)
        return -1;
    unsigned n_rows = 0;
    for (unsigned c = 0; c < n_ctx; c++)
        n_rows += row_is_occupied(counts + (size_t)c * n_sym, n_sym);
    if (table_alloc(t, n_ctx, n_sym, prec, n_rows, e) < 0)
        return -1;
    unsigned row = 0;
    for (unsigned c = 0; c < n_ctx; c++) {
        const uint64_t *count = counts + (size_t)c * n_sym;
        if (!row_is_occupied(count, n_sym))
            continue;
        t->row_of_ctx[c] = (int32_t)row;
        normalize_row(count, n_sym, 1u << prec, t->freq + (size_t)row * n_sym);
        row++;
    }
    return 0;
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

static int read_row(tf_reader *r, unsigned n_sym, unsigned total_freq, uint16_t *freq,
                    tf_error *e)
{
    uint64_t first = tf_read_varint(r), span = tf_read_varint(r);
    if (r->bad || first >= n_sym || span >= n_sym - first)
        return tf_fail(e, EIO, "rans: table row spans symbols out of range");
    uint64_t sum = 0;
    for (unsigned s = (unsigned)first; s < first + span; s++) {
        uint64_t f = tf_read_varint(r);
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
        ctx += tf_read_varint(r);
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
    unsigned l = 0;
    while ((1u << l) < freq)
        l++;
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

int tf_rans_encode(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                   size_t n, unsigned lanes, tf_buf *out, tf_error *e)
{
    if (!tf_rans_lanes_valid(lanes))
        return tf_fail(e, EINVAL, "rans: %u lanes is not a power of two up to %d", lanes,
                       TF_RANS_MAX_LANES);
    /* Each symbol renormalizes at most once (prec <= 16), so the words
     * fit in 2n bytes; they are written at the top of the reservation
     * and moved down behind the header once its length is known. */
    const size_t head_max = 10 + 1 + 4 * TF_RANS_MAX_LANES;
    if (n > (SIZE_MAX - head_max) / 2)
        return tf_fail(e, ENOMEM, "rans: %zu symbols is too many", n);
    uint8_t *base = tf_buf_reserve(out, head_max + 2 * n);
    if (!base)
        return tf_fail(e, ENOMEM, "rans: out of memory for a stream");
    uint32_t x[TF_RANS_MAX_LANES];
    for (unsigned l = 0; l < TF_RANS_MAX_LANES; l++)
        x[l] = TF_RANS_L;
    uint8_t *top = base + head_max + 2 * n, *words = top;
    if (!encode_backwards(enc, ctx, sym, n, x, &words, lanes))
        return fail_uncodable(enc, ctx, sym, n, e);
    size_t words_len = (size_t)(top - words);
    uint8_t *p = base + put_varint(base, 1 + 4 * lanes + words_len);
    *p++ = (uint8_t)lanes;
    for (unsigned l = 0; l < lanes; l++, p += 4)
        tf_le32_put(p, x[l]);
    memmove(p, words, words_len);
    tf_buf_commit(out, (size_t)(p - base) + words_len);
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
