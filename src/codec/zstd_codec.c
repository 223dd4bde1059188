#include "codec/zstd_codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "codec/sample.h"
#include "common/dtype.h"

/* The level is not part of the format (any level decodes the same way);
 * 3 is zstd's own default, a good speed/size point for what reaches this
 * codec (configs, tokenizers, integer buffers). */
#define TF_ZSTD_LEVEL 3

/* ZSTD_compress and ZSTD_decompress make and free a context of up to a
 * few hundred kB at each call (mapped, faulted in and cleared): for the
 * small inputs the writer has by the thousand, such as the ULP models of
 * small chunks, that cost more than the compression (a quarter of the
 * CPU time of writing checkpoints of 2^10-element chunks). So each
 * thread keeps one context of each kind, freed when it exits; a reused
 * context compresses at the level given exactly as a fresh one, so the
 * output is the same. The pointers are thread-local variables, which
 * the leak checker sees; the key only frees them at thread exit. */
static _Thread_local ZSTD_CCtx *thread_cctx;
static _Thread_local ZSTD_DCtx *thread_dctx;
static pthread_key_t cctx_key, dctx_key;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;
static bool keys_made;

static void free_cctx(void *cctx) { ZSTD_freeCCtx(cctx); }
static void free_dctx(void *dctx) { ZSTD_freeDCtx(dctx); }

static void make_keys(void)
{
    keys_made = pthread_key_create(&cctx_key, free_cctx) == 0 &&
                pthread_key_create(&dctx_key, free_dctx) == 0;
}

/* This thread's compression context, or NULL (out of memory: the caller
 * then makes one for the call, as ZSTD_compress does). */
static ZSTD_CCtx *cctx_of_thread(void)
{
    if (!thread_cctx && pthread_once(&keys_once, make_keys) == 0 && keys_made) {
        ZSTD_CCtx *c = ZSTD_createCCtx();
        if (c && pthread_setspecific(cctx_key, c) == 0)
            thread_cctx = c;
        else
            ZSTD_freeCCtx(c);
    }
    return thread_cctx;
}

static ZSTD_DCtx *dctx_of_thread(void)
{
    if (!thread_dctx && pthread_once(&keys_once, make_keys) == 0 && keys_made) {
        ZSTD_DCtx *d = ZSTD_createDCtx();
        if (d && pthread_setspecific(dctx_key, d) == 0)
            thread_dctx = d;
        else
            ZSTD_freeDCtx(d);
    }
    return thread_dctx;
}

int tf_zstd_compress(const uint8_t *src, size_t len, int level, tf_buf *out, tf_error *e)
{
    size_t bound = ZSTD_compressBound(len);
    uint8_t *dst = tf_buf_reserve(out, bound);
    if (!dst)
        return tf_fail(e, ENOMEM, "zstd: out of memory");
    ZSTD_CCtx *cctx = cctx_of_thread();
    size_t n = cctx ? ZSTD_compressCCtx(cctx, dst, bound, src, len, level)
                    : ZSTD_compress(dst, bound, src, len, level);
    if (ZSTD_isError(n))
        return tf_fail(e, EIO, "zstd: %s", ZSTD_getErrorName(n));
    tf_buf_commit(out, n);
    return 0;
}

int tf_zstd_decompress(const uint8_t *enc, size_t enc_len, uint8_t *dst, size_t len, tf_error *e)
{
    unsigned long long content = ZSTD_getFrameContentSize(enc, enc_len);
    if (content != len)
        return tf_fail(e, EIO, "zstd: frame declares %llu bytes, expected %zu", content, len);
    ZSTD_DCtx *dctx = dctx_of_thread();
    size_t n = dctx ? ZSTD_decompressDCtx(dctx, dst, len, enc, enc_len)
                    : ZSTD_decompress(dst, len, enc, enc_len);
    if (ZSTD_isError(n))
        return tf_fail(e, EIO, "zstd: %s", ZSTD_getErrorName(n));
    if (n != len)
        return tf_fail(e, EIO, "zstd: decoded %zu bytes, expected %zu", n, len);
    return 0;
}

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
