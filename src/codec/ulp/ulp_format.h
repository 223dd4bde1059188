/* What the ULP codec's files share (ulp.h has the format): its constants,
 * the float formats it handles, the context of an element and the span
 * of contexts a table has rows for. ulp.c checks formats and reads models
 * and holds the codec, ulp_encode.c fits and encodes, ulp_decode.c
 * decodes. */
#ifndef TRAJFS_CODEC_ULP_ULP_FORMAT_H
#define TRAJFS_CODEC_ULP_ULP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "codec/entropy/rans.h"
#include "common/error.h"
#include "common/simd.h"

/* Model version 1: a chunk has one rANS stream. Version 2 (written since):
 * chunks of at least ULP_STREAMS_FROM elements have ULP_STREAMS streams
 * taking turns by rounds (ulp.h), which double the independent dependency
 * chains of decoding; smaller ones keep one, whose speed matters little
 * and to which a second stream's header (66 bytes) would be a visible
 * share. Both versions decode. */
#define ULP_MODEL_VERSION 2
#define ULP_STREAMS 2
#define ULP_STREAMS_FROM ((size_t)1 << 15)

/* Frequency precision of the tables. The table records it, but the
 * decoding loops have it built in and models with another one are
 * refused: changing it means a new model version. Measured on a 15-delta
 * BF16 trajectory (codes + tables, bits per weight): 4.3110 at 8, 4.2942
 * at 9, 4.2883 at 10, 4.2878 at 11; 12 was worse than 11 (bigger tables
 * for no coding gain) and 2^11 slots keep a row's decoding table at 8 KiB. */
#define ULP_PREC 11

/* rANS lanes of each stream of a chunk: as fast as 8 in scalar code, and
 * the width of two AVX2 (or one AVX-512) registers. The fast decoding
 * loops have it built in. Chunks of fewer than ULP_ONE_LANE_BELOW
 * elements use a single lane instead: their speed does not matter, and
 * 16 lane states (64 bytes a stream) would be a visible share of them. */
#define ULP_LANES 16
#define ULP_ONE_LANE_BELOW 2048

/* The hot loops are written once and instantiated per float format, so
 * that element size, field positions and masks are constants. */
#define ULP_ALWAYS_INLINE static inline __attribute__((always_inline))

/* X(dtype, bytes, mantissa bits, exponent bits, symbol bits) for every
 * format ULPack handles (the same figures as common/dtype.c); symbol bits
 * hold any of its 4 (w - 1) symbols. */
#define ULP_FORMATS(X)                  \
    X(TF_DT_BF16, 2, 7, 8, 6)           \
    X(TF_DT_F16, 2, 10, 5, 6)           \
    X(TF_DT_F32, 4, 23, 8, 7)           \
    X(TF_DT_F64, 8, 52, 11, 8)          \
    X(TF_DT_F8_E4M3, 1, 3, 4, 5)        \
    X(TF_DT_F8_E5M2, 1, 2, 5, 5)

typedef struct {
    unsigned dtype, bytes, n_ctx, n_sym, sym_bits;
    unsigned version; /* of the model */
} ulp_format;

/* Fails (EINVAL) unless dtype is a float ULPack handles and len is a
 * whole number of elements matching a reference of the same length. */
int tf_ulp_format_of(const tf_codec_ctx *ctx, size_t len, ulp_format *f, tf_error *e);

/* The second half of tf_ulp_format_of: len against f and the reference. */
int tf_ulp_check_chunk(const tf_codec_ctx *ctx, size_t len, const ulp_format *f, tf_error *e);

/* tf_ulp_format_of, then the model of ctx read and checked for that
 * format into *t, which the caller frees; f->version is the model's. */
int tf_ulp_format_and_model(const tf_codec_ctx *ctx, size_t len, ulp_format *f,
                            tf_rans_table *t, tf_error *e);

/* The same for the model alone, of no chunk yet (tf_ulp_prepare). */
int tf_ulp_model_of(const tf_codec_ctx *ctx, ulp_format *f, tf_rans_table *t, tf_error *e);

/* The rANS streams of a chunk of n elements. */
ULP_ALWAYS_INLINE unsigned streams_of_chunk(const ulp_format *f, size_t n)
{
    return f->version >= 2 && n >= ULP_STREAMS_FROM ? ULP_STREAMS : 1;
}

/* e_r: the exponent field of the reference element. */
ULP_ALWAYS_INLINE unsigned context_of(uint64_t r, unsigned man, unsigned exp)
{
    return (unsigned)(r >> man) & ((1u << exp) - 1);
}

/* Tables have rows for the exponents [lo, lo + n) the tensor's reference
 * has (with gaps). An element's row is min(e_r - lo, n) in unsigned
 * arithmetic: exponents outside the span share row n, which has no
 * symbols. Fitting counts with the span of all exponents, lo = 0. */
typedef struct {
    unsigned lo, n;
} ctx_span;

ULP_ALWAYS_INLINE unsigned row_of_context(unsigned ctx, ctx_span span)
{
    unsigned row = ctx - span.lo;
    return row < span.n ? row : span.n;
}

#ifdef TF_X86_SIMD
TF_AVX2_INLINE __m256i avx2_set(uint32_t v)
{
    return _mm256_set1_epi32((int)v);
}

TF_AVX2_INLINE __m256i avx2_set16(uint16_t v)
{
    return _mm256_set1_epi16((short)v);
}
#endif

/* Whether the AVX2 loops may run (common/simd.h: the CPU has it,
 * nothing caps it), for the formats they handle: 16 and 32 bits. */
static inline bool use_avx2(unsigned bytes)
{
#ifdef TF_X86_SIMD
    return (bytes == 2 || bytes == 4) && tf_simd_level_get() >= TF_SIMD_AVX2;
#else
    (void)bytes;
    return false;
#endif
}

/* Elements whose raw bits fit one 56-bit put (encoding) or refill
 * (decoding) together: an element has at most 8 * bytes - 3. F64 goes
 * element by element. */
ULP_ALWAYS_INLINE unsigned elems_per_56_bits(unsigned bytes)
{
    return bytes < 8 ? 56 / (8 * bytes - 3) : 1;
}

/* The codec's entry points (tf_codec_ulp, in ulp.c). */
int tf_ulp_fit(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
               tf_error *e);
int tf_ulp_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *out,
                  tf_error *e);
int tf_ulp_encode_pair(const uint8_t *const src[2], const size_t len[2],
                       const tf_codec_ctx *const ctx[2], tf_buf *const out[2], tf_error *e);
/* The model of ctx read, and its encoder built, once for the chunks that
 * share it (tf_codec.prepare); NULL where it is bad or memory lacks. */
void *tf_ulp_prepare(const tf_codec_ctx *ctx);
void tf_ulp_prepared_free(void *prepared);
/* Fits a model on the chunk and encodes it with that model, appending
 * the model to *model: what tf_ulp_fit of the chunk and tf_ulp_encode
 * with its model give, faster. */
int tf_ulp_fit_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx, tf_buf *model,
                      tf_buf *out, tf_error *e);
/* The bytes tf_ulp_fit_encode is estimated to take, model included, from
 * the chunk's sample (codec/sample.h): the symbols' plug-in entropy under
 * their contexts and their raw bits; SIZE_MAX when the codec does not
 * apply. */
size_t tf_ulp_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx);
int tf_ulp_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx, uint8_t *dst,
                  size_t len, tf_error *e);

#endif
