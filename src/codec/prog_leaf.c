/* Literal leaves: the choice among codings, and the two fixed-width ones
 * (RAW and PACK) that need no tables. */
#include "codec/prog_leaf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog_leaf_codings.h"

static unsigned bit_length(uint64_t v)
{
    return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

static size_t packed_bytes(size_t n, unsigned bits)
{
    return (size_t)(((uint64_t)n * bits + 7) / 8);
}

unsigned tf_prog_leaf_symbols(const uint64_t *v, size_t n, uint8_t *sym)
{
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        top = v[i] > top ? v[i] : top;
        sym[i] = (uint8_t)v[i];
    }
    return n == 0 || top >= 256 ? 0 : (unsigned)top + 1;
}

int tf_prog_lit_plan_best(const uint64_t *v, size_t n, unsigned width,
                          const tf_prog_ctx_source *sources, unsigned n_src,
                          tf_prog_lit_plan *plan, tf_error *e)
{
    *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_RAW, .size = 1 + packed_bytes(n, width) };
    uint64_t all = 0;
    for (size_t i = 0; i < n; i++)
        all |= v[i];
    unsigned w = bit_length(all);
    if (w >= 1 && w < width && 2 + packed_bytes(n, w) < plan->size)
        *plan = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_PACK, .pack_width = (uint8_t)w,
                                    .size = 2 + packed_bytes(n, w) };
    if (n == 0 || w > 8)
        return 0;
    uint8_t *sym = malloc(n);
    if (!sym)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu symbols", n);
    unsigned n_sym = tf_prog_leaf_symbols(v, n, sym);
    tf_prog_lit_plan huff = { .size = SIZE_MAX }, rans = { .size = SIZE_MAX };
    int rc = tf_prog_huff_plan(sym, n, n_sym, &huff);
    if (rc == 0)
        rc = tf_prog_rans_plan(sym, n, n_sym, sources, n_src, &rans, e);
    free(sym);
    if (rc < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory planning a literal");
    if (huff.size < plan->size)
        *plan = huff;
    if (rans.size < plan->size)
        *plan = rans;
    return 0;
}

static int write_fixed(const uint64_t *v, size_t n, unsigned bits, tf_buf *out, tf_error *e)
{
    tf_bit_writer w = { .out = out };
    for (size_t i = 0; i < n; i++)
        tf_bits_put_wide(&w, v[i], bits);
    return tf_bits_flush(&w) < 0 ? tf_fail(e, ENOMEM, "prog: out of memory for a literal") : 0;
}

int tf_prog_lit_write(const uint64_t *v, size_t n, unsigned width,
                      const tf_prog_ctx_source *sources, const tf_prog_lit_plan *plan,
                      tf_buf *out, tf_error *e)
{
    if (tf_buf_u8(out, plan->coding) < 0)
        return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
    switch (plan->coding) {
    case TF_PROG_CODE_RAW: return write_fixed(v, n, width, out, e);
    case TF_PROG_CODE_PACK:
        if (tf_buf_u8(out, plan->pack_width) < 0)
            return tf_fail(e, ENOMEM, "prog: out of memory for a literal");
        return write_fixed(v, n, plan->pack_width, out, e);
    default: break;
    }
    uint8_t *sym = malloc(n ? n : 1);
    if (!sym)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu symbols", n);
    unsigned n_sym = tf_prog_leaf_symbols(v, n, sym);
    int rc = plan->coding == TF_PROG_CODE_HUFF
                 ? tf_prog_huff_write(sym, n, n_sym, out, e)
                 : tf_prog_rans_write(sym, n, n_sym, sources, plan, out, e);
    free(sym);
    return rc;
}

/* ---- decoding ---- */

/* RAW and PACK: the payload must be exactly n words of `bits` bits. */
static int open_fixed(tf_prog_lit_reader *r, tf_reader *in, unsigned bits, tf_error *e)
{
    size_t need = packed_bytes((size_t)r->n, bits);
    if (tf_reader_left(in) != need)
        return tf_fail(e, EIO, "prog: literal of %llu words of %u bits has %zu bytes, not %zu",
                       (unsigned long long)r->n, bits, tf_reader_left(in), need);
    r->pack_width = bits;
    r->bits = tf_bit_reader_make(tf_read_bytes(in, need), need);
    return 0;
}

int tf_prog_lit_open(tf_prog_lit_reader *r, const uint8_t *body, size_t len, unsigned width,
                     uint64_t n, const tf_prog_siblings *siblings, tf_error *e)
{
    *r = (tf_prog_lit_reader){ .width = width, .n = n };
    tf_reader in = tf_reader_make(body, len);
    r->coding = tf_read_u8(&in);
    if (in.bad)
        return tf_fail(e, EIO, "prog: empty literal");
    if ((r->coding == TF_PROG_CODE_HUFF || r->coding == TF_PROG_CODE_RANS) && n == 0)
        return tf_fail(e, EIO, "prog: entropy-coded literal of no words");
    switch (r->coding) {
    case TF_PROG_CODE_RAW: return open_fixed(r, &in, width, e);
    case TF_PROG_CODE_PACK: {
        unsigned w = tf_read_u8(&in);
        if (in.bad || w < 1 || w >= width)
            return tf_fail(e, EIO, "prog: packed literal of width %u in %u bits", w, width);
        return open_fixed(r, &in, w, e);
    }
    case TF_PROG_CODE_HUFF: return tf_prog_huff_open(r, &in, e);
    case TF_PROG_CODE_RANS: return tf_prog_rans_open(r, &in, siblings, e);
    }
    return tf_fail(e, EIO, "prog: unknown literal coding %u", r->coding);
}

/* Whole bytes per word: read straight from the payload. */
static void read_bytes_le(tf_bit_reader *b, unsigned bytes, uint64_t *out, size_t count)
{
    const uint8_t *p = b->p;
    switch (bytes) {
    case 1:
        for (size_t i = 0; i < count; i++)
            out[i] = p[i];
        break;
    case 2:
        for (size_t i = 0; i < count; i++)
            out[i] = (uint64_t)p[2 * i] | (uint64_t)p[2 * i + 1] << 8;
        break;
    case 4:
        for (size_t i = 0; i < count; i++)
            out[i] = tf_le32_get(p + 4 * i);
        break;
    case 8:
        for (size_t i = 0; i < count; i++)
            out[i] = tf_le64_get(p + 8 * i);
        break;
    default:
        for (size_t i = 0; i < count; i++) {
            uint64_t v = 0;
            for (unsigned k = 0; k < bytes; k++)
                v |= (uint64_t)p[bytes * i + k] << (8 * k);
            out[i] = v;
        }
    }
    b->p += count * bytes;
}

static void read_fixed(tf_prog_lit_reader *r, uint64_t *out, size_t count)
{
    unsigned bits = r->pack_width;
    /* open_fixed sized the payload for exactly n words, and the caller
     * never asks for more, so whole-byte words need no checks. */
    if (bits % 8 == 0) {
        read_bytes_le(&r->bits, bits / 8, out, count);
        return;
    }
    /* One refill serves `group` words while the payload lasts. */
    const unsigned group = bits <= 28 ? 56 / bits : 1;
    const uint64_t mask = tf_prog_mask(bits);
    tf_bit_reader *b = &r->bits;
    size_t i = 0;
    while (i < count) {
        size_t take = count - i < group ? count - i : group;
        tf_bits_refill(b);
        if (bits > 28 || b->count < take * bits) {
            out[i++] = tf_bits_get_wide(b, bits);
            continue;
        }
        for (size_t j = 0; j < take; j++, i++) {
            out[i] = b->acc & mask;
            b->acc >>= bits;
        }
        b->count -= (unsigned)(take * bits);
    }
}

void tf_prog_lit_read(tf_prog_lit_reader *r, uint64_t *out, size_t count,
                      const uint64_t *ctx_words)
{
    if (count > r->n - r->done) { /* a caller bug; never read past the payload */
        r->bad = true;
        memset(out, 0, count * sizeof *out);
        return;
    }
    switch (r->coding) {
    case TF_PROG_CODE_RAW:
    case TF_PROG_CODE_PACK: read_fixed(r, out, count); break;
    case TF_PROG_CODE_HUFF: tf_prog_huff_read(r, out, count); break;
    case TF_PROG_CODE_RANS: tf_prog_rans_read(r, out, count, ctx_words); break;
    }
    r->done += count;
}

int tf_prog_lit_finish(const tf_prog_lit_reader *r, tf_error *e)
{
    if (r->bad)
        return tf_fail(e, EIO, "prog: literal payload is corrupt or truncated");
    if (r->coding == TF_PROG_CODE_RANS)
        return tf_rans_stream_close(&r->stream, e);
    bool exact = r->pack_width % 8 == 0 && r->coding != TF_PROG_CODE_HUFF
                     ? r->bits.p == r->bits.end
                     : tf_bits_exhausted(&r->bits);
    return exact ? 0 : tf_fail(e, EIO, "prog: literal payload has trailing data");
}

void tf_prog_lit_close(tf_prog_lit_reader *r)
{
    free(r->huff);
    tf_rans_decoder_free(&r->dec);
    tf_rans_table_free(&r->table);
    r->huff = NULL;
}
