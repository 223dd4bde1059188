/* Static interleaved rANS over (context, symbol) streams.
 *
 * A table holds one normalized frequency row per occupied context: the
 * frequencies of a row are positive for the symbols the row can code, zero
 * for the others, and sum to 1 << prec. Rows are fit from counts, written
 * compactly (only occupied contexts, only the span of occupied symbols) and
 * read back with full validation.
 *
 * A stream codes n symbols, symbol i under context ctx[i] (or context 0
 * when ctx is NULL), interleaved over `lanes` rANS states (1, 2, 4, 8 or
 * 16; the encoder's caller chooses): symbol i goes to lane i % lanes. The
 * lanes share one word stream, so the decoder visits symbols in order
 * 0..n-1. More lanes decode faster (independent dependency chains, one
 * SIMD register of 8 or 16 32-bit lanes); each costs 4 bytes of state per
 * stream, which matters for short streams. Lane states are 32 bits, kept
 * in [TF_RANS_L, 2^32) by 16-bit words.
 *
 * Stream layout (self-delimiting):
 *   varint len | u8 lanes | lanes x u32 LE terminal encoder states | words
 * where len counts the bytes after itself and words are u16 LE in
 * decoding order. A decoder that finishes a stream checks that every word
 * was consumed and every lane is back to the encoder's initial state
 * TF_RANS_L.
 *
 * Three ways to decode: tf_rans_decode() fills a symbol array; codecs that
 * want to do per-symbol work in the same loop use tf_rans_stream_open(),
 * the inline tf_rans_get_*() and tf_rans_stream_close(); and
 * tf_rans_decode_rows() decodes a piece of open streams at a time, with
 * rows computed from context words (SIMD where it can).
 *
 * rans_table.c fits, writes and reads tables; rans_encode.c and
 * rans_decode.c code streams. */
#ifndef TRAJFS_CODEC_ENTROPY_RANS_H
#define TRAJFS_CODEC_ENTROPY_RANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/simd.h"

/* Part of the stream format: never change. */
#define TF_RANS_MAX_LANES 16
#define TF_RANS_L (1u << 16)
#define TF_RANS_MAX_SYMBOLS 256
/* Frequencies are positive and at most 1 << TF_RANS_MAX_PREC; a decoding
 * slot packs symbol (8 bits), slot - cumulative frequency and frequency
 * (12 bits each) in 32 bits. */
#define TF_RANS_MIN_PREC 8
#define TF_RANS_MAX_PREC 11

#ifdef TF_X86_SIMD
/* AVX2 renormalization of eight lanes: for each mask of renormalizing
 * lanes (bit l: lane l), the index of each such lane's word among the
 * words they take, the number of those lanes before it (0 for the other
 * lanes). Shared with the ULP codec's fused decoding loop. */
extern const int32_t tf_rans_avx2_word_lane[256][8];
#endif

typedef struct {
    unsigned n_ctx, n_sym, prec, n_rows;
    int32_t *row_of_ctx; /* n_ctx entries: row index, -1 for unoccupied */
    uint16_t *freq;      /* n_rows x n_sym */
} tf_rans_table;

/* The plug-in conditional entropy, in bits, of counts laid out as n_rows
 * rows of n_sym symbols (a row a context): what no static code of those
 * contexts beats. */
double tf_rans_entropy_bits(const uint64_t *counts, size_t n_rows, unsigned n_sym);

/* counts is n_ctx x n_sym; a context with no counts gets no row. */
int tf_rans_table_fit(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                      const uint64_t *counts, tf_error *e);
/* The same when only contexts [ctx_lo, ctx_lo + n_rows) can have counts:
 * counts is n_rows x n_sym, for those. */
int tf_rans_table_fit_span(tf_rans_table *t, unsigned n_ctx, unsigned n_sym, unsigned prec,
                           const uint64_t *counts, unsigned ctx_lo, unsigned n_rows,
                           tf_error *e);
int tf_rans_table_write(const tf_rans_table *t, tf_buf *out, tf_error *e);
/* n_ctx and n_sym come from the caller (they are implied by what the
 * table is for); everything read is validated. */
int tf_rans_table_read(tf_rans_table *t, tf_cursor *r, unsigned n_ctx, unsigned n_sym,
                       tf_error *e);
void tf_rans_table_free(tf_rans_table *t);
/* Frequency of sym under ctx, 0 when absent or out of range. */
unsigned tf_rans_table_freq(const tf_rans_table *t, unsigned ctx, unsigned sym);

typedef struct {
    uint32_t x_lim;  /* renormalize while the state exceeds this */
    uint32_t rcp;    /* reciprocal of freq, less 2^32 (see rans_encode.c) */
    uint16_t freq, cum, cmpl; /* cmpl = (1 << prec) - freq */
    uint8_t shift;
} tf_rans_enc_sym;

typedef struct {
    unsigned n_ctx, n_sym;
    /* n_ctx entries; a context without a row gets an all-zero row, whose
     * zero frequencies the encoder refuses. */
    const tf_rans_enc_sym **row_of_ctx;
    tf_rans_enc_sym *sym; /* (rows + 1) x n_sym, the last row all zero */
} tf_rans_encoder;

int tf_rans_encoder_init(tf_rans_encoder *enc, const tf_rans_table *t, tf_error *e);
void tf_rans_encoder_free(tf_rans_encoder *enc);
/* True for the lane counts a stream may have. */
static inline bool tf_rans_lanes_valid(unsigned lanes)
{
    return lanes && lanes <= TF_RANS_MAX_LANES && !(lanes & (lanes - 1));
}

/* Appends one stream of `lanes` lanes. Fails (-1, EINVAL) when a symbol
 * has no frequency under its context: a table fit on other data does not
 * cover it. */
int tf_rans_encode(const tf_rans_encoder *enc, const uint16_t *ctx, const uint8_t *sym,
                   size_t n, unsigned lanes, tf_buf *out, tf_error *e);

/* The same streams, from one 16-bit coding index per symbol, which a
 * codec computes alongside its other per-element work (with SIMD):
 *   index = row << sym_bits | sym,  row = min(ctx - ctx_lo, n_rows)
 * in unsigned arithmetic, [ctx_lo, ctx_lo + n_rows) being the span of
 * occupied contexts: a context outside it lands on row n_rows, which has
 * no frequencies. Each entry packs what coding a symbol needs in 64 bits
 * (see rans_encode.c; 0 when the symbol has no frequency), so that a vector
 * encoder fetches it with one gather. */
typedef struct {
    unsigned prec, sym_bits, ctx_lo, n_rows;
    uint64_t *entry; /* (n_rows + 1) << sym_bits entries */
} tf_rans_indexed;

/* Fails (EINVAL) unless every symbol fits sym_bits and the indexes fit
 * 16 bits. */
int tf_rans_indexed_init(tf_rans_indexed *ix, const tf_rans_table *t, unsigned sym_bits,
                         tf_error *e);
/* The same for the given span of contexts, which holds every occupied
 * one (its other rows have no frequencies): for indexes computed under
 * that span. */
int tf_rans_indexed_init_span(tf_rans_indexed *ix, const tf_rans_table *t, unsigned sym_bits,
                              unsigned ctx_lo, unsigned n_rows, tf_error *e);
void tf_rans_indexed_free(tf_rans_indexed *ix);

static inline unsigned tf_rans_index(const tf_rans_indexed *ix, unsigned ctx, unsigned sym)
{
    unsigned row = ctx - ix->ctx_lo;
    return (row < ix->n_rows ? row : ix->n_rows) << ix->sym_bits | sym;
}

/* tf_rans_encode of the symbols with coding indexes idx[0..n): the same
 * bytes. The sole difference is speed (an AVX2 loop where the CPU has
 * it and `lanes` is 16). */
int tf_rans_encode_indexed(const tf_rans_indexed *ix, const uint16_t *idx, size_t n,
                           unsigned lanes, tf_buf *out, tf_error *e);
/* Stream `turn` (below k) of k streams that take turns by rounds
 * of `lanes` symbols: symbol i of idx[0..n) is on stream (i / lanes) % k
 * (as tf_rans_decode_rows reads them). The bytes tf_rans_encode_indexed
 * gives for those symbols in order, without copying them out. */
int tf_rans_encode_indexed_turn(const tf_rans_indexed *ix, const uint16_t *idx, size_t n,
                                unsigned lanes, unsigned k, unsigned turn, tf_buf *out,
                                tf_error *e);

/* The one-lane streams of two chunks, coded side by side: stream j, of
 * the coding indexes idx[j][0..n[j]), is appended to out[j] (two
 * distinct buffers), the bytes tf_rans_encode_indexed(ix, idx[j], n[j],
 * 1, out[j]) gives. A one-lane stream's state updates form one chain,
 * which bounds its speed; two of them interleave. (Small chunks have one
 * lane: codec/ulp/ulp.h.) */
int tf_rans_encode_indexed_pair(const tf_rans_indexed *ix, const uint16_t *const idx[2],
                                const size_t n[2], tf_buf *const out[2], tf_error *e);

typedef struct {
    unsigned n_ctx, prec;
    const uint32_t **slots_of_ctx; /* n_ctx entries, NULL when not built */
    uint32_t *slots;
} tf_rans_decoder;

/* Builds decoding slots for the contexts flagged in used (n_ctx flags), or
 * for every occupied context when used is NULL. A flagged context without
 * a row is an error: the data needs a row the table does not have.
 * Dense: the row of context c is at slots + (c << prec), an address SIMD
 * code can compute, for n_ctx << prec slots of memory (only the rows
 * built are written). Otherwise the rows are packed. */
int tf_rans_decoder_init(tf_rans_decoder *dec, const tf_rans_table *t, const uint8_t *used,
                         bool dense, tf_error *e);
void tf_rans_decoder_free(tf_rans_decoder *dec);
/* Reads one stream from r into sym[0..n). */
int tf_rans_decode(const tf_rans_decoder *dec, tf_cursor *r, const uint16_t *ctx,
                   uint8_t *sym, size_t n, tf_error *e);

/* The 1 << prec decoding slots of ctx into slots, all zero when the
 * table has no row for it (see tf_rans_decode_rows). */
void tf_rans_row_slots(const tf_rans_table *t, unsigned ctx, uint32_t *slots);

/* Decoding slots of ctx (NULL when not built) for the inline getters. */
static inline const uint32_t *tf_rans_slots(const tf_rans_decoder *dec, unsigned ctx)
{
    return ctx < dec->n_ctx ? dec->slots_of_ctx[ctx] : NULL;
}

typedef struct {
    uint32_t x[TF_RANS_MAX_LANES];
    unsigned lanes;
    const uint8_t *p, *end; /* remaining words */
    bool bad;               /* a lane wanted a word past the end */
} tf_rans_stream;

int tf_rans_stream_open(tf_rans_stream *s, tf_cursor *r, tf_error *e);
/* Checks that the stream ended exactly where the encoder started. */
int tf_rans_stream_close(const tf_rans_stream *s, tf_error *e);

/* True when the next `symbols` symbols cannot run out of words (each
 * takes at most one), so they may use tf_rans_get_fast(). */
static inline bool tf_rans_words_suffice(const tf_rans_stream *s, size_t symbols)
{
    return (size_t)(s->end - s->p) / 2 >= symbols;
}

/* One decoding step of a lane state: its slot (symbol in the low 8 bits;
 * 0 in a row of zeros standing for a missing one, see
 * tf_rans_decode_rows), and the state before renormalization. */
static inline uint32_t tf_rans_step_slot(uint32_t *x, const uint32_t *slots, unsigned prec)
{
    uint32_t slot = slots[*x & ((1u << prec) - 1)];
    *x = (slot >> 20) * (*x >> prec) + (slot >> 8 & 0xfff);
    return slot;
}

/* The same, for the symbol. */
static inline unsigned tf_rans_step(uint32_t *x, const uint32_t *slots, unsigned prec)
{
    return tf_rans_step_slot(x, slots, prec) & 0xff;
}

/* Renormalizes lane state x and stores it; the caller guarantees a word
 * is available (tf_rans_words_suffice). Arithmetic, not a
 * branch (a conditional here compiles to a branch that mispredicts often:
 * whether a lane needs a word is close to a coin flip). */
static inline void tf_rans_renorm_fast(tf_rans_stream *s, unsigned lane, uint32_t x)
{
    uint32_t need = x < TF_RANS_L;
    uint32_t word = (uint32_t)s->p[0] | (uint32_t)s->p[1] << 8;
    s->x[lane] = x << (16 * need) | (word & (0 - need));
    s->p += 2 * need;
}

/* Decodes a symbol, a word being available. */
static inline unsigned tf_rans_get_fast(tf_rans_stream *s, unsigned lane, const uint32_t *slots,
                                        unsigned prec)
{
    uint32_t x = s->x[lane];
    unsigned sym = tf_rans_step(&x, slots, prec);
    tf_rans_renorm_fast(s, lane, x);
    return sym;
}

/* Renormalizes lane state x near the end of the stream, never reading
 * past it, and stores it. */
static inline void tf_rans_renorm_checked(tf_rans_stream *s, unsigned lane, uint32_t x)
{
    if (x < TF_RANS_L) {
        if (s->end - s->p < 2) {
            s->bad = true;
        } else {
            x = x << 16 | (uint32_t)s->p[0] | (uint32_t)s->p[1] << 8;
            s->p += 2;
        }
    }
    s->x[lane] = x;
}

/* Decodes a symbol near the end of the stream, never reading past it. */
static inline unsigned tf_rans_get_checked(tf_rans_stream *s, unsigned lane,
                                           const uint32_t *slots, unsigned prec)
{
    uint32_t x = s->x[lane];
    unsigned sym = tf_rans_step(&x, slots, prec);
    tf_rans_renorm_checked(s, lane, x);
    return sym;
}

/* At most this many streams decode as one (tf_rans_decode_rows). */
#define TF_RANS_MAX_STREAMS 2

/* Decodes symbols at .. at + count - 1 of k streams (1 or 2) of the same
 * number of lanes, which take turns by rounds: symbol i is on stream
 * (i / lanes) % k, lane i % lanes (more streams, more independent
 * dependency chains to overlap). Symbol at + j goes to sym[j], decoded
 * under the row min(ctx[j] - ctx_lo, n_rows) (unsigned; row 0 for all
 * when ctx is NULL) of dense slots: row r at slots + (r << prec), rows
 * 0..n_rows all present, as zeros where the table has none. Returns false
 * when some symbol fell on a zero slot (the data needs a row the table
 * lacks); a stream running out of words gets s[t].bad. Whole rounds go
 * unchecked while the words suffice (with AVX2 for 16 lanes when simd
 * allows it); the same symbols either way. The rows of a turn depend on
 * nothing decoded in it, so ctx may be sym - k * lanes: each symbol
 * under the one a turn earlier. */
bool tf_rans_decode_rows(tf_rans_stream *s, unsigned k, uint64_t at, const uint32_t *slots,
                         unsigned prec, const uint32_t *ctx, uint32_t ctx_lo, uint32_t n_rows,
                         uint32_t *sym, size_t count, tf_simd_level simd);

#endif
