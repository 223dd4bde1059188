#include "codec/zstd_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "codec/sample.h"
#include "common/dtype.h"
#include "common/zstd_frame.h"

/* The level is not part of the format (any level decodes the same way);
 * 3 is zstd's own default, a good speed/size point for what reaches this
 * codec (configs, tokenizers, integer buffers). */
#define TF_ZSTD_LEVEL 3

/* Of the sample's runs, zstd compresses every ZSTD_RUN_STEP-th: a
 * quarter of the runs estimates a chunk's size about as well as all of
 * them, in a third of the time (on the benchmark's large bf16 and float32
 * chunks, 3 to 7% high either way: the sample's one small frame costs
 * more than a chunk's blocks; a high estimate only keeps these codecs
 * from being tried where they would not have won). */
#define ZSTD_RUN_STEP 4

size_t tf_zstd_estimate(const uint8_t *src, size_t n, unsigned bytes, tf_zstd_arrange *arrange,
                        int level)
{
    const size_t all = tf_sample_runs(n), step = all >= ZSTD_RUN_STEP ? ZSTD_RUN_STEP : 1;
    const size_t runs = all / step, run = tf_sample_run_len(n), m = runs * run;
    uint8_t *sample = malloc(2 * m * bytes + 1);
    tf_buf out = { 0 };
    if (!sample)
        return SIZE_MAX;
    for (size_t k = 0; k < runs; k++)
        memcpy(sample + k * run * bytes, src + tf_sample_run_start(n, k * step) * bytes,
               run * bytes);
    const uint8_t *in = sample;
    if (arrange) {
        arrange(sample, m, bytes, sample + m * bytes);
        in = sample + m * bytes;
    }
    size_t size = tf_zstd_compress(in, m * bytes, level, &out, NULL) == 0
                      ? (size_t)((double)out.len * (double)n / (double)m)
                      : SIZE_MAX;
    tf_buf_free(&out);
    free(sample);
    return size;
}

static size_t zstd_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx)
{
    (void)ctx;
    return tf_zstd_estimate(src, len, 1, NULL, TF_ZSTD_LEVEL);
}

static int zstd_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                       tf_buf *out, tf_error *e)
{
    (void)ctx;
    return tf_zstd_compress(src, len, TF_ZSTD_LEVEL, out, e);
}

static int zstd_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                       uint8_t *dst, size_t len, tf_error *e)
{
    (void)ctx;
    return tf_zstd_decompress(enc, enc_len, dst, len, e);
}

/* The chunks bytegroup does not take: a chunk gets one general-purpose
 * compression, of grouped bytes where its elements allow. */
static bool zstd_standalone_for(unsigned dtype)
{
    return !tf_dtype_is_wide_float(dtype);
}

const tf_codec tf_codec_zstd = {
    .id = TF_CODEC_ZSTD,
    .name = "zstd",
    .standalone_for = zstd_standalone_for,
    .estimate = zstd_estimate,
    .encode = zstd_encode,
    .decode = zstd_decode,
};
