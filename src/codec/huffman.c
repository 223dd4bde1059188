#include "codec/huffman.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define KRAFT_FULL (1u << TF_HUFF_MAX_LEN) /* Kraft sum 1 in units of 2^-MAX_LEN */

/* Present symbols in increasing order of count (ties by symbol). */
static unsigned sorted_symbols(const uint64_t *count, unsigned n_sym, uint16_t *order)
{
    unsigned m = 0;
    for (unsigned s = 0; s < n_sym; s++) {
        if (!count[s])
            continue;
        unsigned i = m++;
        while (i > 0 && count[order[i - 1]] > count[s]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = (uint16_t)s;
    }
    return m;
}

/* Unlimited Huffman depths of the m >= 2 sorted leaves, by the two-queue
 * method: leaves and merged nodes are each produced in increasing weight,
 * so the two lightest are always at the queue heads. */
static void huffman_depths(const uint64_t *count, const uint16_t *order, unsigned m,
                           unsigned *depth)
{
    uint64_t weight[2 * TF_HUFF_MAX_SYMBOLS];
    uint16_t parent[2 * TF_HUFF_MAX_SYMBOLS];
    for (unsigned i = 0; i < m; i++)
        weight[i] = count[order[i]];
    unsigned leaf = 0, node = m, next = m;
    for (; next < 2 * m - 1; next++) {
        unsigned pick[2];
        for (int k = 0; k < 2; k++) {
            bool take_leaf = leaf < m && (node >= next || weight[leaf] <= weight[node]);
            pick[k] = take_leaf ? leaf++ : node++;
        }
        weight[next] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = parent[pick[1]] = (uint16_t)next;
    }
    unsigned node_depth[2 * TF_HUFF_MAX_SYMBOLS];
    node_depth[2 * m - 2] = 0;
    for (unsigned i = 2 * m - 2; i-- > 0;)
        node_depth[i] = node_depth[parent[i]] + 1; /* parents come later */
    for (unsigned i = 0; i < m; i++)
        depth[i] = node_depth[i];
}

static uint32_t kraft_units(unsigned len)
{
    return KRAFT_FULL >> len;
}

/* Clamps to the limit, then lengthens the codes whose lengthening costs
 * the fewest bits per unit of Kraft sum until the code is valid, then
 * shortens the most frequent codes while the Kraft sum leaves room. */
static void limit_lengths(const uint64_t *count, const uint16_t *order, unsigned m,
                          unsigned limit, uint8_t *len)
{
    uint32_t kraft = 0;
    for (unsigned i = 0; i < m; i++) {
        unsigned s = order[i];
        if (len[s] > limit)
            len[s] = (uint8_t)limit;
        kraft += kraft_units(len[s]);
    }
    while (kraft > KRAFT_FULL) {
        unsigned best = m;
        for (unsigned i = 0; i < m; i++) {
            unsigned s = order[i];
            /* cost count / (units freed) = count * 2^(len + 1) / 2^MAX */
            if (len[s] < limit &&
                (best == m || count[s] << len[s] < count[order[best]] << len[order[best]]))
                best = i;
        }
        unsigned s = order[best];
        kraft -= kraft_units(len[s] + 1);
        len[s]++;
    }
    for (;;) {
        unsigned best = m;
        for (unsigned i = 0; i < m; i++) {
            unsigned s = order[i];
            if (len[s] > 1 && kraft + kraft_units(len[s]) <= KRAFT_FULL &&
                (best == m || count[s] >= count[order[best]]))
                best = i;
        }
        if (best == m)
            break;
        unsigned s = order[best];
        kraft += kraft_units(len[s]);
        len[s]--;
    }
}

void tf_huff_lengths(const uint64_t *count, unsigned n_sym, unsigned limit, uint8_t *len)
{
    uint16_t order[TF_HUFF_MAX_SYMBOLS];
    unsigned depth[TF_HUFF_MAX_SYMBOLS];
    memset(len, 0, n_sym);
    unsigned m = sorted_symbols(count, n_sym, order);
    if (m == 1)
        len[order[0]] = 1;
    if (m < 2)
        return;
    huffman_depths(count, order, m, depth);
    unsigned max = 0;
    for (unsigned i = 0; i < m; i++) {
        len[order[i]] = (uint8_t)(depth[i] < 255 ? depth[i] : 255);
        max = depth[i] > max ? depth[i] : max;
    }
    /* m symbols need codes of ceil(log2(m)) bits at least */
    while (limit < TF_HUFF_MAX_LEN && (1u << limit) < m)
        limit++;
    if (max > limit)
        limit_lengths(count, order, m, limit, len);
}

uint64_t tf_huff_cost_bits(const uint64_t *count, const uint8_t *len, unsigned n_sym)
{
    uint64_t bits = 0;
    for (unsigned s = 0; s < n_sym; s++)
        bits += count[s] * len[s];
    return bits;
}

static uint16_t reverse_bits(uint16_t code, unsigned n)
{
    uint16_t r = 0;
    for (unsigned i = 0; i < n; i++)
        r = (uint16_t)(r << 1 | (code >> i & 1));
    return r;
}

/* Canonical codes (MSB-first values) of the given lengths. */
static void canonical_codes(const uint8_t *len, unsigned n_sym, uint16_t *code)
{
    unsigned per_len[TF_HUFF_MAX_LEN + 1] = { 0 };
    for (unsigned s = 0; s < n_sym; s++)
        per_len[len[s]]++;
    per_len[0] = 0;
    unsigned next[TF_HUFF_MAX_LEN + 2];
    next[1] = 0;
    for (unsigned l = 2; l <= TF_HUFF_MAX_LEN + 1; l++)
        next[l] = (next[l - 1] + per_len[l - 1]) << 1;
    for (unsigned s = 0; s < n_sym; s++)
        code[s] = len[s] ? (uint16_t)next[len[s]]++ : 0;
}

void tf_huff_encoder_init(tf_huff_encoder *enc, const uint8_t *len, unsigned n_sym)
{
    memset(enc, 0, sizeof *enc);
    canonical_codes(len, n_sym, enc->code);
    for (unsigned s = 0; s < n_sym; s++) {
        enc->len[s] = len[s];
        enc->code[s] = reverse_bits(enc->code[s], len[s]);
    }
}

void tf_huff_decoder_init(tf_huff_decoder *dec, const uint8_t *len, unsigned n_sym,
                          uint64_t codes)
{
    uint16_t code[TF_HUFF_MAX_SYMBOLS];
    dec->bits = 1;
    for (unsigned s = 0; s < n_sym; s++)
        dec->bits = len[s] > dec->bits ? len[s] : dec->bits;
    memset(dec->entry, 0, sizeof dec->entry[0] << dec->bits);
    canonical_codes(len, n_sym, code);
    for (unsigned s = 0; s < n_sym; s++) {
        if (!len[s])
            continue;
        unsigned first = reverse_bits(code[s], len[s]);
        for (unsigned pattern = first; pattern < (1u << dec->bits); pattern += 1u << len[s])
            dec->entry[pattern] = (uint16_t)(s | (unsigned)len[s] << 8);
    }
    /* The multi table pays for its filling when there are more codes to
     * read than patterns; several codes a pattern, when there are several
     * times more, the window growing to 12 bits while they are. */
    unsigned window = dec->bits;
    while (window < TF_HUFF_MAX_LEN && codes >= 8u << window)
        window++;
    const unsigned most = codes >= 4u << window ? TF_HUFF_MULTI_MAX : 1;
    dec->multi_bits = window;
    dec->has_multi = codes >= 1u << window;
    const unsigned mask = (1u << dec->bits) - 1;
    for (unsigned pattern = 0; dec->has_multi && pattern < (1u << window); pattern++) {
        /* the bits after the codes taken, zeros above them: a next code
         * of at most window - used bits is found on them alone */
        uint32_t multi = 0;
        unsigned used = 0, n = 0;
        while (n < most) {
            unsigned ent = dec->entry[(pattern >> used) & mask], l = ent >> 8;
            if (!l || used + l > window)
                break;
            multi |= (ent & 0xffu) << (8 * n++);
            used += l;
        }
        dec->multi[pattern] = n ? multi | n << 24 | used << 28 : TF_HUFF_MULTI_BAD;
    }
}

/* The span [first, first + count) of symbols with a code. */
static unsigned code_span(const uint8_t *len, unsigned n_sym, unsigned *first)
{
    unsigned lo = 0, hi = n_sym;
    while (lo < n_sym && !len[lo])
        lo++;
    while (hi > lo && !len[hi - 1])
        hi--;
    *first = lo;
    return hi - lo;
}

size_t tf_huff_table_size(const uint8_t *len, unsigned n_sym)
{
    tf_buf b = { 0 };
    size_t size = tf_huff_table_write(len, n_sym, &b, NULL) == 0 ? b.len : SIZE_MAX;
    tf_buf_free(&b);
    return size;
}

int tf_huff_table_write(const uint8_t *len, unsigned n_sym, tf_buf *out, tf_error *e)
{
    unsigned first, count = code_span(len, n_sym, &first);
    int rc = tf_buf_varint(out, first) | tf_buf_varint(out, count);
    for (unsigned i = 0; i < count; i += 2) {
        unsigned high = i + 1 < count ? len[first + i + 1] : 0;
        rc |= tf_buf_u8(out, (uint8_t)(len[first + i] | high << 4));
    }
    return rc ? tf_fail(e, ENOMEM, "huffman: out of memory writing a table") : 0;
}

int tf_huff_table_read(tf_reader *r, unsigned max_sym, uint8_t *len, tf_error *e)
{
    uint64_t first = tf_read_varint(r), count = tf_read_varint(r);
    if (r->bad || count == 0 || first >= max_sym || count > max_sym - first)
        return tf_fail(e, EIO, "huffman: table spans symbols out of range");
    const uint8_t *nibbles = tf_read_bytes(r, (size_t)(count + 1) / 2);
    if (!nibbles)
        return tf_fail(e, EIO, "huffman: table is truncated");
    memset(len, 0, max_sym);
    uint32_t kraft = 0;
    for (unsigned i = 0; i < count; i++) {
        unsigned l = nibbles[i / 2] >> (4 * (i % 2)) & 0xf;
        if (l > TF_HUFF_MAX_LEN)
            return tf_fail(e, EIO, "huffman: code length %u is over the limit", l);
        len[first + i] = (uint8_t)l;
        kraft += l ? kraft_units(l) : 0;
    }
    if (count % 2 && nibbles[count / 2] >> 4)
        return tf_fail(e, EIO, "huffman: table padding is not zero");
    if (!len[first] || !len[first + count - 1] || kraft > KRAFT_FULL)
        return tf_fail(e, EIO, "huffman: table is not a prefix code");
    return 0;
}
