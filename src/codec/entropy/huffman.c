#include "codec/entropy/huffman.h"

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

/* The bits of each byte in reverse order (the classic construction: each
 * step places two more bits, from the outside in). */
#define REV2(n) (n), (n) + 2 * 64, (n) + 1 * 64, (n) + 3 * 64
#define REV4(n) REV2(n), REV2((n) + 2 * 16), REV2((n) + 1 * 16), REV2((n) + 3 * 16)
#define REV6(n) REV4(n), REV4((n) + 2 * 4), REV4((n) + 1 * 4), REV4((n) + 3 * 4)
static const uint8_t reversed_byte[256] = { REV6(0), REV6(2), REV6(1), REV6(3) };

/* The low n bits of code (n <= 16) in reverse order: codes are assigned
 * MSB first, and read LSB first. */
static uint16_t reverse_bits(uint16_t code, unsigned n)
{
    uint32_t x = (uint32_t)reversed_byte[code & 0xff] << 8 | reversed_byte[code >> 8];
    return (uint16_t)(x >> (16 - n));
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

/* The entries of the codes of lengths len[0, count) (symbols first + i),
 * by doubling: a code of length l, read LSB first, owns every pattern
 * whose low l bits are it. Placed once in the table of the 2^l patterns
 * of l bits, the doublings that follow copy it to the others; no shorter
 * code is there before it, the code being prefix-free. A pattern no code
 * starts keeps length 0. */
static void fill_entries(tf_huff_decoder *dec, const uint8_t *len, unsigned count,
                         unsigned first)
{
    uint16_t code[TF_HUFF_MAX_SYMBOLS];
    uint8_t order[TF_HUFF_MAX_SYMBOLS]; /* by length, then symbol */
    unsigned at[TF_HUFF_MAX_LEN + 2] = { 0 };
    canonical_codes(len, count, code);
    for (unsigned s = 0; s < count; s++)
        at[len[s] + 1]++;
    for (unsigned l = 1; l <= TF_HUFF_MAX_LEN; l++)
        at[l + 1] += at[l];
    const unsigned coded = count - at[1]; /* at[1]: how many have no code */
    for (unsigned s = 0; s < count; s++)
        if (len[s])
            order[at[len[s]]++ - (count - coded)] = (uint8_t)s;
    dec->entry[0] = 0;
    unsigned i = 0;
    for (unsigned l = 1; l <= dec->bits; l++) {
        memcpy(dec->entry + (1u << (l - 1)), dec->entry, sizeof dec->entry[0] << (l - 1));
        for (; i < coded && len[order[i]] == l; i++) {
            unsigned s = order[i];
            dec->entry[reverse_bits(code[s], l)] = (uint16_t)((first + s) | l << 8);
        }
    }
}

/* The multi table: up to three codes a pattern, each lookup on the bits
 * after the codes taken, zeros above them, so that a next code of at
 * most window - used bits is found on them alone; three lookups whatever
 * they find, no branch to mispredict. */
static void fill_multi(tf_huff_decoder *dec)
{
    const unsigned window = dec->multi_bits, mask = (1u << dec->bits) - 1;
    for (uint32_t p = 0; p < (1u << window); p++) {
        uint32_t e1 = dec->entry[p & mask], l1 = e1 >> 8;
        uint32_t e2 = dec->entry[(p >> l1) & mask], l2 = e2 >> 8;
        uint32_t e3 = dec->entry[(p >> (l1 + l2)) & mask], l3 = e3 >> 8;
        uint32_t one = l1 && l1 <= window;
        uint32_t two = one && l2 && l1 + l2 <= window;
        uint32_t three = two && l3 && l1 + l2 + l3 <= window;
        uint32_t syms = (e1 & 0xffu) | (two ? (e2 & 0xffu) << 8 : 0) |
                        (three ? (e3 & 0xffu) << 16 : 0);
        uint32_t used = l1 + (two ? l2 : 0) + (three ? l3 : 0);
        dec->multi[p] = one ? syms | (1 + two + three) << 24 | used << 28 : TF_HUFF_MULTI_LONG;
    }
}

tf_huff_decoder *tf_huff_decoder_new(const uint8_t *len, unsigned first, unsigned count,
                                     uint64_t codes)
{
    len += first;
    unsigned bits = 1;
    for (unsigned s = 0; s < count; s++)
        bits = len[s] > bits ? len[s] : bits;
    /* a pattern for every 16 codes at most: more would cost more to fill
     * than they save */
    unsigned window = TF_HUFF_MAX_LEN;
    while (window > 1 && codes < 16u << window)
        window--;
    const bool has_multi = codes >= 16u << window;
    const size_t multi = has_multi ? sizeof(uint32_t) << window : 0;
    tf_huff_decoder *dec = malloc(sizeof *dec + multi + (sizeof(uint16_t) << bits));
    if (!dec)
        return NULL;
    *dec = (tf_huff_decoder){ .bits = bits, .has_multi = has_multi, .multi_bits = window };
    dec->multi = (uint32_t *)(dec + 1);
    dec->entry = (uint16_t *)((uint8_t *)dec->multi + multi);
    fill_entries(dec, len, count, first);
    if (has_multi)
        fill_multi(dec);
    return dec;
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

int tf_huff_table_read(tf_cursor *r, unsigned max_sym, uint8_t *len, unsigned *span_first,
                       tf_error *e)
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
    *span_first = (unsigned)first;
    return (int)count;
}
