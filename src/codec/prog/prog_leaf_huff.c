/* Literal leaves in canonical Huffman codes: one bit stream (HUFF), or
 * four (HUFF4) that a decoder walks side by side, four independent
 * chains of table lookups where one stream has one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_leaf_codings.h"

static unsigned streams_of(unsigned coding)
{
    return coding == TF_PROG_CODE_HUFF4 ? TF_PROG_HUFF_STREAMS : 1;
}

/* The stream word i is coded in. */
static unsigned stream_of(uint64_t i, unsigned streams)
{
    return (unsigned)(i / TF_PROG_HUFF_SEGMENT) & (streams - 1);
}

static size_t varint_bytes(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

void tf_prog_huff_count(const uint8_t *sym, size_t n, tf_prog_huff_counts *c)
{
    memset(c, 0, sizeof *c);
    for (size_t at = 0; at < n; at += TF_PROG_HUFF_SEGMENT) {
        uint64_t *count = c->count[stream_of(at, TF_PROG_HUFF_STREAMS)];
        size_t end = n - at < TF_PROG_HUFF_SEGMENT ? n : at + TF_PROG_HUFF_SEGMENT;
        for (size_t i = at; i < end; i++)
            count[sym[i]]++;
    }
}

unsigned tf_prog_huff_limit(size_t n)
{
    unsigned limit = 1;
    while (limit < TF_HUFF_MAX_LEN && (size_t)4 << limit <= n)
        limit++;
    return limit;
}

/* Code lengths for the n counted symbols. */
static void fit_lengths(const tf_prog_huff_counts *c, size_t n, unsigned n_sym, uint8_t *len)
{
    uint64_t count[TF_HUFF_MAX_SYMBOLS] = { 0 };
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        for (unsigned v = 0; v < n_sym; v++)
            count[v] += c->count[s][v];
    tf_huff_lengths(count, n_sym, tf_prog_huff_limit(n), len);
}

/* Bits of the codes of each of the four streams. */
static void stream_bits(const tf_prog_huff_counts *c, unsigned n_sym, const uint8_t *len,
                        uint64_t *bits)
{
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++) {
        bits[s] = 0;
        for (unsigned v = 0; v < n_sym; v++)
            bits[s] += c->count[s][v] * len[v];
    }
}

int tf_prog_huff_plan_counts(const tf_prog_huff_counts *c, size_t n, unsigned n_sym,
                             tf_prog_lit_plan *huff, tf_prog_lit_plan *huff4)
{
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    uint64_t bits[TF_PROG_HUFF_STREAMS];
    fit_lengths(c, n, n_sym, len);
    size_t table = tf_huff_table_size(len, n_sym);
    if (table == SIZE_MAX)
        return -1;
    stream_bits(c, n_sym, len, bits);
    /* the same codes in one stream, or in four with three lengths */
    size_t one = 1 + table + (size_t)((bits[0] + bits[1] + bits[2] + bits[3] + 7) / 8);
    size_t four = 1 + table;
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++) {
        size_t bytes = (size_t)((bits[s] + 7) / 8);
        four += bytes + (s + 1 < TF_PROG_HUFF_STREAMS ? varint_bytes(bytes) : 0);
    }
    *huff = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_HUFF, .size = one };
    *huff4 = (tf_prog_lit_plan){ .coding = TF_PROG_CODE_HUFF4, .size = four };
    return 0;
}

int tf_prog_huff_plan(const uint8_t *sym, size_t n, unsigned n_sym, tf_prog_lit_plan *huff,
                      tf_prog_lit_plan *huff4)
{
    tf_prog_huff_counts *c = malloc(sizeof *c);
    if (!c)
        return -1;
    tf_prog_huff_count(sym, n, c);
    int rc = tf_prog_huff_plan_counts(c, n, n_sym, huff, huff4);
    free(c);
    return rc;
}

/* A stream's codes being written: bytes go 8 at a time to p, which has
 * 8 bytes of slack past the stream's end; fewer than 8 bits wait in
 * acc. */
typedef struct {
    uint8_t *p;
    uint64_t acc;
    unsigned count;
} code_writer;

/* A code and its length in one table entry: one load a symbol. */
static inline void put_code(code_writer *w, uint32_t code)
{
    w->acc |= (uint64_t)(code & 0xffff) << w->count;
    w->count += code >> 16;
    tf_le64_put(w->p, w->acc);
    w->p += w->count >> 3;
    w->acc >>= w->count & ~7u;
    w->count &= 7;
}

static void flush_codes(code_writer *w)
{
    if (w->count)
        *w->p++ = (uint8_t)w->acc;
}

/* Four codes at sym[0..3] in one entry: their bits (at most 48) and
 * their total length, for one store where there would be four. */
static inline uint64_t four_codes(const uint8_t *sym, const uint32_t *code, unsigned *len)
{
    uint32_t c0 = code[sym[0]], c1 = code[sym[1]], c2 = code[sym[2]], c3 = code[sym[3]];
    unsigned l0 = c0 >> 16, l1 = c1 >> 16, l2 = c2 >> 16;
    uint64_t v = (uint64_t)(c0 & 0xffff) | (uint64_t)(c1 & 0xffff) << l0 |
                 (uint64_t)(c2 & 0xffff) << (l0 + l1) | (uint64_t)(c3 & 0xffff) << (l0 + l1 + l2);
    *len = l0 + l1 + l2 + (c3 >> 16);
    return v;
}

static inline void put_four(code_writer *w, const uint8_t *sym, const uint32_t *code)
{
    unsigned len;
    uint64_t v = four_codes(sym, code, &len);
    w->acc |= v << w->count; /* count + len <= 7 + 48 */
    w->count += len;
    tf_le64_put(w->p, w->acc);
    w->p += w->count >> 3;
    w->acc >>= w->count & ~7u;
    w->count &= 7;
}

/* The codes of the four streams, a turn of four segments at a time, the
 * segments' codes interleaved: four independent chains of shifts where
 * one stream has one. */
static void write_turns4(const uint8_t *sym, size_t n, const uint32_t *code, code_writer *w)
{
    enum { SEG = TF_PROG_HUFF_SEGMENT, TURN = TF_PROG_HUFF_STREAMS * TF_PROG_HUFF_SEGMENT };
    size_t at = 0;
    for (; n - at >= TURN; at += TURN)
        for (size_t i = at; i < at + SEG; i += 4) {
            put_four(&w[0], sym + i, code);
            put_four(&w[1], sym + i + SEG, code);
            put_four(&w[2], sym + i + 2 * SEG, code);
            put_four(&w[3], sym + i + 3 * SEG, code);
        }
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        for (size_t i = at + s * SEG; i < n && i < at + (s + 1) * SEG; i++)
            put_code(&w[s], code[sym[i]]);
}

/* Appends the code lengths, then the codes of sym[0..n) in the streams
 * of coding: stream s is written into room[s] bytes (at least what its
 * codes take) with 8 bytes of slack, past room for the varint lengths
 * that precede the streams; once the streams are written, their lengths
 * go in and the streams are moved down behind them. */
static int write_codes(const uint8_t *sym, size_t n, unsigned n_sym, const uint8_t *len,
                       unsigned coding, const size_t *room, tf_buf *out, tf_error *e)
{
    if (tf_huff_table_write(len, n_sym, out, e) < 0)
        return -1;
    tf_huff_encoder enc;
    tf_huff_encoder_init(&enc, len, n_sym);
    uint32_t code[TF_HUFF_MAX_SYMBOLS] = { 0 };
    for (unsigned v = 0; v < n_sym; v++)
        code[v] = enc.code[v] | (uint32_t)enc.len[v] << 16;
    const unsigned streams = streams_of(coding);
    const size_t gap = 10 * (streams - 1); /* the longest varints */
    size_t total = gap;
    for (unsigned s = 0; s < streams; s++)
        total += room[s] + 8;
    uint8_t *base = tf_buf_reserve(out, total);
    if (!base)
        return tf_fail(e, ENOMEM, "prog: out of memory for codes");
    code_writer w[TF_PROG_HUFF_STREAMS];
    uint8_t *start[TF_PROG_HUFF_STREAMS];
    for (size_t s = 0, off = gap; s < streams; off += room[s] + 8, s++)
        w[s] = (code_writer){ .p = start[s] = base + off };
    if (streams == 1) {
        size_t i = 0;
        for (; i + 4 <= n; i += 4)
            put_four(&w[0], sym + i, code);
        for (; i < n; i++)
            put_code(&w[0], code[sym[i]]);
    } else
        write_turns4(sym, n, code, w);
    size_t bytes[TF_PROG_HUFF_STREAMS];
    for (unsigned s = 0; s < streams; s++) {
        flush_codes(&w[s]);
        bytes[s] = (size_t)(w[s].p - start[s]);
    }
    for (unsigned s = 0; s + 1 < streams; s++) /* within the room reserved */
        tf_buf_varint(out, bytes[s]);
    for (unsigned s = 0; s < streams; s++) {
        memmove(out->data + out->len, start[s], bytes[s]);
        tf_buf_commit(out, bytes[s]);
    }
    return 0;
}

int tf_prog_huff_write_counts(const uint8_t *sym, size_t n, unsigned n_sym,
                              const tf_prog_huff_counts *c, unsigned coding, tf_buf *out,
                              tf_error *e)
{
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    uint64_t bits[TF_PROG_HUFF_STREAMS];
    fit_lengths(c, n, n_sym, len);
    stream_bits(c, n_sym, len, bits);
    if (streams_of(coding) == 1)
        bits[0] += bits[1] + bits[2] + bits[3];
    size_t room[TF_PROG_HUFF_STREAMS];
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        room[s] = (size_t)((bits[s] + 7) / 8);
    return write_codes(sym, n, n_sym, len, coding, room, out, e);
}

int tf_prog_huff_write_lengths(const uint8_t *sym, size_t n, unsigned n_sym,
                               const uint8_t *len, unsigned coding, tf_buf *out, tf_error *e)
{
    unsigned longest = 0;
    for (unsigned v = 0; v < n_sym; v++)
        longest = len[v] > longest ? len[v] : longest;
    /* the words of each stream (all in one), times the longest code */
    const size_t turn = (size_t)TF_PROG_HUFF_STREAMS * TF_PROG_HUFF_SEGMENT;
    size_t room[TF_PROG_HUFF_STREAMS] = { n };
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS && streams_of(coding) > 1; s++) {
        const size_t rest = n % turn, before = (size_t)s * TF_PROG_HUFF_SEGMENT;
        room[s] = n / turn * TF_PROG_HUFF_SEGMENT +
                  (rest > before ? (rest - before < TF_PROG_HUFF_SEGMENT ? rest - before
                                                                         : TF_PROG_HUFF_SEGMENT)
                                 : 0);
    }
    for (unsigned s = 0; s < TF_PROG_HUFF_STREAMS; s++)
        room[s] = (room[s] * longest + 7) / 8;
    return write_codes(sym, n, n_sym, len, coding, room, out, e);
}

int tf_prog_huff_write(const uint8_t *sym, size_t n, unsigned n_sym, unsigned coding,
                       tf_buf *out, tf_error *e)
{
    tf_prog_huff_counts *c = malloc(sizeof *c);
    if (!c)
        return tf_fail(e, ENOMEM, "prog: out of memory for codes");
    tf_prog_huff_count(sym, n, c);
    int rc = tf_prog_huff_write_counts(sym, n, n_sym, c, coding, out, e);
    free(c);
    return rc;
}

int tf_prog_huff_open(tf_prog_lit_reader *r, tf_cursor *in, tf_error *e)
{
    unsigned max_sym = r->width >= 8 ? TF_HUFF_MAX_SYMBOLS : 1u << r->width;
    uint8_t len[TF_HUFF_MAX_SYMBOLS];
    unsigned first;
    int count = tf_huff_table_read(in, max_sym, len, &first, e);
    if (count < 0)
        return -1;
    const unsigned streams = streams_of(r->coding);
    uint64_t size[TF_PROG_HUFF_STREAMS];
    for (unsigned s = 0; s + 1 < streams; s++)
        size[s] = tf_read_varint(in);
    size_t left = tf_cursor_left(in);
    for (unsigned s = 0; s + 1 < streams; s++) {
        if (in->bad || size[s] > left)
            return tf_fail(e, EIO, "prog: Huffman stream %u overruns its literal", s);
        left -= (size_t)size[s];
    }
    size[streams - 1] = left;
    static const uint8_t none[1];
    for (unsigned s = 0; s < streams; s++) {
        const uint8_t *p = size[s] ? tf_read_bytes(in, (size_t)size[s]) : none;
        r->bits[s] = tf_bit_reader_make(p, (size_t)size[s]);
    }
    r->huff = tf_huff_decoder_new(len, first, (unsigned)count, r->n);
    if (!r->huff)
        return tf_fail(e, ENOMEM, "prog: out of memory for a Huffman table");
    return 0;
}

bool tf_prog_huff_exhausted(const tf_prog_lit_reader *r)
{
    bool all = true;
    for (unsigned s = 0; s < streams_of(r->coding); s++)
        all &= tf_bits_exhausted(&r->bits[s]);
    return all;
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

/* One code; a pattern no code starts, or the bits running out, is bad. */
static inline uint32_t get_one(const tf_huff_decoder *dec, tf_bit_reader *b, bool *bad)
{
    if (b->count < TF_HUFF_MAX_LEN)
        tf_bits_refill(b);
    unsigned ent = dec->entry[b->acc & ((1u << dec->bits) - 1)], len = ent >> 8;
    *bad |= len == 0 || !take_bits(b, len);
    return ent & 0xff;
}

/* The up to three symbols of a multi entry into out[0..2] (bytes 0-2
 * of e, in one store); out[3] is written too, with a byte the next codes
 * overwrite. */
static inline void put_symbols(uint8_t *out, uint32_t e)
{
    tf_le32_put(out, e);
}

/* The multi entry of the codes the low bits of `bits` begin with (multi:
 * dec->multi, mask: its patterns', held by the caller where stores
 * through byte pointers would make them reloaded), a long code looked up
 * again. */
static inline uint32_t multi_entry(const tf_huff_decoder *dec, const uint32_t *multi,
                                   uint32_t mask, uint64_t bits)
{
    uint32_t e = multi[bits & mask];
    return __builtin_expect(e & TF_HUFF_MULTI_LONG, 0) ? tf_huff_long_code(dec, bits) : e;
}

/* Up to TF_HUFF_MULTI_MAX codes into out[0..2] (out[3] written too);
 * returns how many, at least 1 (a bad pattern counts as one). */
static inline unsigned get_multi(const tf_huff_decoder *dec, tf_bit_reader *b, uint8_t *out,
                                 bool *bad)
{
    tf_bits_refill(b);
    uint32_t e = multi_entry(dec, dec->multi, (1u << dec->multi_bits) - 1, b->acc);
    *bad |= (e >> 26 & 1) | !take_bits(b, e >> 28);
    put_symbols(out, e);
    return e >> 24 & 3;
}

/* Words [0, count) of one stream's run, count codes in a row. */
static void get_run(const tf_huff_decoder *dec, tf_bit_reader *b, uint8_t *out, size_t count,
                    bool *bad)
{
    tf_bit_reader local = *b; /* in registers, not stored every code */
    bool wrong = false;
    size_t i = 0;
    while (dec->has_multi && count - i > TF_HUFF_MULTI_MAX)
        i += get_multi(dec, &local, out + i, &wrong);
    for (; i < count; i++)
        out[i] = (uint8_t)get_one(dec, &local, &wrong);
    *b = local;
    *bad |= wrong;
}

/* The fast loop's form of a stream's position: bit `used` (< 8) of byte
 * p on, where every 8-byte load from p that lies in the stream serves
 * 57 bits, four lookups of at most TF_HUFF_MAX_LEN bits. */
typedef struct {
    const uint8_t *p, *end;
    unsigned used;
    uint8_t *out, *seg_end; /* the next word; the end of its segment */
} fast_stream;

#define FAST_LOOKUPS 4
/* Words a group of lookups needs left in its segment: it writes a word
 * more than it decodes. */
#define FAST_ROOM (FAST_LOOKUPS * TF_HUFF_MULTI_MAX + 1)

static fast_stream fast_from(const tf_bit_reader *b, uint8_t *out, uint8_t *seg_end)
{
    uint64_t left = (uint64_t)(b->end - b->p) * 8 + b->count; /* bits */
    return (fast_stream){ .p = b->end - (left + 7) / 8, .end = b->end,
                          .used = (unsigned)((8 - left % 8) % 8), .out = out,
                          .seg_end = seg_end };
}

static tf_bit_reader fast_back(const fast_stream *f)
{
    tf_bit_reader b = tf_bit_reader_make(f->p, (size_t)(f->end - f->p));
    tf_bits_refill(&b);
    take_bits(&b, f->used); /* within the byte at p, which is there */
    return b;
}

/* Groups of FAST_LOOKUPS lookups in each of S streams, while every one
 * has room for a group (FAST_ROOM words, 8 bytes at p): the lookups of
 * the streams interleaved so that their chains (a table load, then the
 * shift it sets) overlap; each group's bits of a stream lie in the 8
 * bytes at its p (a long code too, of at most TF_HUFF_MAX_LEN bits).
 * One body, a function per stream count. */
#define FAST_GROUPS(name, S)                                                                \
    static void name(const tf_huff_decoder *dec, fast_stream *f)                            \
    {                                                                                       \
        const uint32_t *multi = dec->multi, mask = (1u << dec->multi_bits) - 1;             \
        const uint8_t *p[S];                                                                \
        unsigned used[S];                                                                   \
        uint8_t *out[S];                                                                    \
        bool room = true;                                                                   \
        _Pragma("GCC unroll 4") for (unsigned s = 0; s < S; s++)                            \
        {                                                                                   \
            p[s] = f[s].p;                                                                  \
            used[s] = f[s].used;                                                            \
            out[s] = f[s].out;                                                              \
            room &= f[s].seg_end - out[s] >= FAST_ROOM && f[s].end - p[s] >= 8;             \
        }                                                                                   \
        while (room) {                                                                      \
            uint64_t bits[S];                                                               \
            _Pragma("GCC unroll 4") for (unsigned s = 0; s < S; s++)                        \
                bits[s] = tf_le64_get(p[s]);                                                \
            _Pragma("GCC unroll 4") for (unsigned k = 0; k < FAST_LOOKUPS; k++)             \
                _Pragma("GCC unroll 4") for (unsigned s = 0; s < S; s++)                    \
            {                                                                               \
                uint32_t e = multi_entry(dec, multi, mask, bits[s] >> used[s]);             \
                used[s] += e >> 28;                                                         \
                put_symbols(out[s], e);                                                     \
                out[s] += e >> 24 & 3;                                                      \
            }                                                                               \
            _Pragma("GCC unroll 4") for (unsigned s = 0; s < S; s++)                        \
            {                                                                               \
                p[s] += used[s] >> 3;                                                       \
                used[s] &= 7;                                                               \
                room &= f[s].seg_end - out[s] >= FAST_ROOM && f[s].end - p[s] >= 8;         \
            }                                                                               \
        }                                                                                   \
        _Pragma("GCC unroll 4") for (unsigned s = 0; s < S; s++)                            \
        {                                                                                   \
            f[s].p = p[s];                                                                  \
            f[s].used = used[s];                                                            \
            f[s].out = out[s];                                                              \
        }                                                                                   \
    }

FAST_GROUPS(fast_groups4, 4)
FAST_GROUPS(fast_groups1, 1)

/* Then one lookup at a time, while a lookup has room (the up to three
 * words it decodes and the one more it writes) and 8 bytes at p: the
 * fast loop's tail, without a refill's branches. */
static void fast_singles(const tf_huff_decoder *dec, fast_stream *f)
{
    const uint32_t *multi = dec->multi, mask = (1u << dec->multi_bits) - 1;
    const uint8_t *p = f->p;
    unsigned used = f->used;
    uint8_t *out = f->out;
    while (f->seg_end - out > TF_HUFF_MULTI_MAX && f->end - p >= 8) {
        uint64_t bits = tf_le64_get(p) >> used;
        uint32_t e = multi_entry(dec, multi, mask, bits);
        used += e >> 28;
        put_symbols(out, e);
        out += e >> 24 & 3;
        p += used >> 3;
        used &= 7;
    }
    f->p = p;
    f->used = used;
    f->out = out;
}

/* The rest of a stream's segment from f on: the fast loops, then its
 * last words one by one, where a pattern no code starts (which the fast
 * loops step over) is noted too. */
static void finish_segment(const tf_huff_decoder *dec, fast_stream *f, tf_bit_reader *b,
                           bool *bad)
{
    fast_groups1(dec, f);
    fast_singles(dec, f);
    *b = fast_back(f);
    get_run(dec, b, f->out, (size_t)(f->seg_end - f->out), bad);
}

/* The first count (<= a turn) words of a turn of the four streams (a
 * segment each, in order; the last ones short or empty) into out: groups
 * of lookups in the four streams together while all have room, then
 * each stream alone. */
static void get_turn4(const tf_huff_decoder *dec, tf_bit_reader *b, uint8_t *out, size_t count,
                      bool *bad)
{
    enum { SEG = TF_PROG_HUFF_SEGMENT };
    fast_stream f[4];
    for (unsigned s = 0; s < 4; s++) {
        size_t from = s * SEG < count ? s * SEG : count, to = from + SEG < count ? from + SEG : count;
        f[s] = fast_from(&b[s], out + from, out + to);
    }
    fast_groups4(dec, f);
    bool wrong = false;
    for (unsigned s = 0; s < 4; s++)
        finish_segment(dec, &f[s], &b[s], &wrong);
    *bad |= wrong;
}

void tf_prog_huff_read(tf_prog_lit_reader *r, uint8_t *out, size_t count)
{
    const tf_huff_decoder *dec = r->huff;
    const unsigned streams = streams_of(r->coding);
    const size_t turn = (size_t)streams * TF_PROG_HUFF_SEGMENT;
    bool bad = false;
    uint64_t at = r->done;
    for (size_t i = 0; i < count;) {
        if (streams == 4 && dec->has_multi && at % turn == 0) {
            size_t take = count - i < turn ? count - i : turn;
            get_turn4(dec, r->bits, out + i, take, &bad);
            i += take;
            at += take;
            continue;
        }
        /* up to the end of this segment, in one stream */
        size_t take = TF_PROG_HUFF_SEGMENT - (size_t)(at % TF_PROG_HUFF_SEGMENT);
        take = take < count - i ? take : count - i;
        tf_bit_reader *b = &r->bits[stream_of(at, streams)];
        if (dec->has_multi) {
            fast_stream f = fast_from(b, out + i, out + i + take);
            finish_segment(dec, &f, b, &bad);
        } else {
            get_run(dec, b, out + i, take, &bad);
        }
        i += take;
        at += take;
    }
    r->bad |= bad;
}
