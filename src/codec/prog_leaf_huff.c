/* Literal leaves in canonical Huffman codes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog_leaf_codings.h"

static void count_symbols(const uint8_t *sym, size_t n, uint64_t *count)
{
    memset(count, 0, TF_HUFF_MAX_SYMBOLS * sizeof *count);
    for (size_t i = 0; i < n; i++)
        count[sym[i]]++;
}

int tf_prog_huff_plan(const uint8_t *sym, size_t n, unsigned n_sym, tf_prog_lit_plan *plan)
{
    uint64_t count[TF_HUFF_MAX_SYMBOLS];
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    count_symbols(sym, n, count);
    tf_huff_lengths(count, n_sym, len);
    uint64_t bits = tf_huff_cost_bits(count, len, n_sym);
    size_t table = tf_huff_table_size(len, n_sym);
    if (table == SIZE_MAX)
        return -1;
    *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_HUFF,
                                .size = 1 + table + (size_t)((bits + 7) / 8) };
    return 0;
}

int tf_prog_huff_write(const uint8_t *sym, size_t n, unsigned n_sym, tf_buf *out, tf_error *e)
{
    uint64_t count[TF_HUFF_MAX_SYMBOLS];
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    count_symbols(sym, n, count);
    tf_huff_lengths(count, n_sym, len);
    if (tf_huff_table_write(len, n_sym, out, e) < 0)
        return -1;
    tf_huff_encoder enc;
    tf_huff_encoder_init(&enc, len, n_sym);
    tf_bit_writer w = { .out = out };
    for (size_t i = 0; i < n; i++)
        tf_bits_put(&w, enc.code[sym[i]], enc.len[sym[i]]);
    return tf_bits_flush(&w) < 0 ? tf_fail(e, ENOMEM, "prog: out of memory for codes") : 0;
}

int tf_prog_huff_open(tf_prog_lit_reader *r, tf_reader *in, tf_error *e)
{
    unsigned max_sym = r->width >= 8 ? TF_HUFF_MAX_SYMBOLS : 1u << r->width;
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    if (tf_huff_table_read(in, max_sym, len, e) < 0)
        return -1;
    r->huff = malloc(sizeof *r->huff);
    if (!r->huff)
        return tf_fail(e, ENOMEM, "prog: out of memory for a Huffman table");
    tf_huff_decoder_init(r->huff, len, max_sym, r->n);
    size_t left = tf_reader_left(in);
    r->bits = tf_bit_reader_make(tf_read_bytes(in, left), left);
    return 0;
}

/* Takes len bits, or what is left when that is less (never shifting past
 * it); returns whether all were there. */
static inline bool take_bits(tf_bit_reader *b, unsigned len)
{
    bool there = len <= b->count;
    len = there ? len : b->count;
    b->acc >>= len;
    b->count -= len;
    return there;
}

void tf_prog_huff_read(tf_prog_lit_reader *r, uint32_t *out, size_t count)
{
    const tf_huff_decoder *dec = r->huff;
    const uint64_t mask = ((uint64_t)1 << dec->bits) - 1;
    tf_bit_reader b = r->bits;
    bool bad = false;
    size_t i = 0;
    /* With pairs, two codes a lookup where they fit the table's bits (one
     * where not), while two more symbols are wanted: out[i + 1] is
     * overwritten next when only one came. Then a code a lookup. */
    while (dec->has_pairs && i + 2 <= count) {
        if (b.count < 2 * TF_HUFF_MAX_LEN)
            tf_bits_refill(&b);
        uint32_t e = dec->pair[b.acc & mask];
        unsigned n = e >> 24;
        bad |= n == 0 || !take_bits(&b, e >> 16 & 0xff);
        out[i] = e & 0xff;
        out[i + 1] = e >> 8 & 0xff;
        i += n + (n == 0); /* a pattern no code starts: bad, and on */
    }
    for (; i < count; i++) {
        if (b.count < TF_HUFF_MAX_LEN)
            tf_bits_refill(&b);
        unsigned ent = dec->entry[b.acc & mask], len = ent >> 8;
        bad |= len == 0 || !take_bits(&b, len);
        out[i] = ent & 0xff;
    }
    r->bits = b;
    r->bad |= bad;
}
