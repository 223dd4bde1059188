#include "codec/bytegroup.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "codec/zstd_codec.h"
#include "common/dtype.h"
#include "common/zstd_frame.h"

/* The level is not part of the format. Most of the gain is in the
 * exponent plane, which even fast levels find; see README for figures. */
#define TF_BYTEGROUP_LEVEL 3

void tf_bytegroup_split(const uint8_t *src, size_t n, unsigned w, uint8_t *dst)
{
    for (unsigned p = 0; p < w; p++) {
        const uint8_t *s = src + (w - 1 - p);
        uint8_t *d = dst + (size_t)p * n;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i * w];
    }
}

void tf_bytegroup_join(const uint8_t *src, size_t n, unsigned w, uint8_t *dst)
{
    for (unsigned p = 0; p < w; p++) {
        const uint8_t *s = src + (size_t)p * n;
        uint8_t *d = dst + (w - 1 - p);
        for (size_t i = 0; i < n; i++)
            d[i * w] = s[i];
    }
}

/* Element width for grouping, or 0 when the codec does not apply. */
static unsigned group_width(const tf_codec_ctx *ctx, size_t len)
{
    if (!tf_dtype_is_wide_float(ctx->dtype))
        return 0;
    unsigned size = tf_dtype_get(ctx->dtype)->size;
    return len % size ? 0 : size;
}

static int bytegroup_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                            tf_buf *out, tf_error *e)
{
    unsigned w = group_width(ctx, len);
    if (!w)
        return tf_fail(e, EINVAL, "bytegroup: needs a multi-byte float dtype");
    uint8_t *planes = malloc(len ? len : 1);
    if (!planes)
        return tf_fail(e, ENOMEM, "bytegroup: out of memory");
    tf_bytegroup_split(src, len / w, w, planes);
    int rc = tf_zstd_compress(planes, len, TF_BYTEGROUP_LEVEL, out, e);
    free(planes);
    return rc;
}

static size_t bytegroup_estimate(const uint8_t *src, size_t len, const tf_codec_ctx *ctx)
{
    unsigned w = group_width(ctx, len);
    return w ? tf_zstd_estimate(src, len / w, w, tf_bytegroup_split, TF_BYTEGROUP_LEVEL) : SIZE_MAX;
}

static int bytegroup_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                            uint8_t *dst, size_t len, tf_error *e)
{
    unsigned w = group_width(ctx, len);
    if (!w)
        return tf_fail(e, EIO, "bytegroup: blob of %zu bytes has dtype %u", len, ctx->dtype);
    uint8_t *planes = malloc(len ? len : 1);
    if (!planes)
        return tf_fail(e, ENOMEM, "bytegroup: out of memory");
    int rc = tf_zstd_decompress(enc, enc_len, planes, len, e);
    if (rc == 0)
        tf_bytegroup_join(planes, len / w, w, dst);
    free(planes);
    return rc;
}

const tf_codec tf_codec_bytegroup = {
    .id = TF_CODEC_BYTEGROUP,
    .name = "bytegroup",
    .standalone_for = tf_dtype_is_wide_float,
    .estimate = bytegroup_estimate,
    .encode = bytegroup_encode,
    .decode = bytegroup_decode,
};
