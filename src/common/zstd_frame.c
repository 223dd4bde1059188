#include "common/zstd_frame.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <zstd.h>

/* ZSTD_compress and ZSTD_decompress make and free a context of up to a
 * few hundred kB at each call (mapped, faulted in and cleared): for the
 * small inputs the writer has by the thousand, such as the ULP models of
 * small chunks, that cost more than the compression (a quarter of the
 * CPU time of writing checkpoints of 2^10-element chunks); and making one
 * asks the processor its features (CPUID), in a virtual machine a trap to
 * the host, which was a tenth of an open's time (a catalog segment a
 * commit). So each
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
