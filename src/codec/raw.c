#include "codec/raw.h"

#include <errno.h>
#include <string.h>

static int raw_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                      tf_buf *out, tf_error *e)
{
    (void)ctx;
    if (tf_buf_put(out, src, len) < 0)
        return tf_fail(e, ENOMEM, "raw: out of memory");
    return 0;
}

static int raw_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                      uint8_t *dst, size_t len, tf_error *e)
{
    (void)ctx;
    if (enc_len != len)
        return tf_fail(e, EIO, "raw: %zu stored bytes for %zu expected", enc_len, len);
    if (len)
        memcpy(dst, enc, len);
    return 0;
}

/* Exact, and free. */
static size_t raw_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx)
{
    (void)src;
    (void)ctx;
    return len;
}

/* Raw competes for every chunk, so that no blob is larger than its bytes. */
static bool raw_standalone_for(unsigned dtype)
{
    (void)dtype;
    return true;
}

const tf_codec tf_codec_raw = {
    .id = TF_CODEC_RAW,
    .name = "raw",
    .standalone_for = raw_standalone_for,
    .estimate = raw_estimate,
    .encode = raw_encode,
    .decode = raw_decode,
};
