#include "codec/ulp/ulp.h"

#include <errno.h>

#include "codec/ulp/ulp_format.h"
#include "common/dtype.h"

static int format_of_dtype(unsigned dtype, ulp_format *f, tf_error *e)
{
    *f = (ulp_format){ .dtype = dtype, .version = ULP_MODEL_VERSION };
    switch (dtype) {
#define X(dt, size, man, exp, sb)                 \
    case dt:                                      \
        f->bytes = size;                          \
        f->n_ctx = 1u << exp;                     \
        f->n_sym = tf_ulp_symbol_count(8 * size); \
        f->sym_bits = sb;                         \
        break;
        ULP_FORMATS(X)
#undef X
    default:
        return tf_fail(e, EINVAL, "ulp: needs a float dtype, not %u", dtype);
    }
    return 0;
}

int tf_ulp_check_chunk(const tf_codec_ctx *ctx, size_t len, const ulp_format *f, tf_error *e)
{
    if (!ctx->ref || ctx->ref_len != len || len % f->bytes)
        return tf_fail(e, EINVAL, "ulp: %zu bytes of %s need a reference of the same length",
                       len, tf_dtype_get(f->dtype)->name);
    return 0;
}

int tf_ulp_format_of(const tf_codec_ctx *ctx, size_t len, ulp_format *f, tf_error *e)
{
    return format_of_dtype(ctx->dtype, f, e) < 0 ? -1 : tf_ulp_check_chunk(ctx, len, f, e);
}

static int read_model(const tf_codec_ctx *ctx, ulp_format *f, tf_rans_table *t, tf_error *e)
{
    if (!ctx->model)
        return tf_fail(e, EINVAL, "ulp: no model");
    tf_cursor r = tf_cursor_make(ctx->model, ctx->model_len);
    unsigned version = tf_read_u8(&r), dtype = tf_read_u8(&r);
    if (r.bad || version < 1 || version > ULP_MODEL_VERSION || dtype != f->dtype)
        return tf_fail(e, EIO, "ulp: model is not a version 1 to %d model for dtype %u",
                       ULP_MODEL_VERSION, f->dtype);
    f->version = version;
    if (tf_rans_table_read(t, &r, f->n_ctx, f->n_sym, e) < 0)
        return -1;
    if (tf_cursor_left(&r) || t->prec != ULP_PREC) {
        tf_rans_table_free(t);
        return tf_fail(e, EIO, "ulp: model has trailing bytes or precision other than %d",
                       ULP_PREC);
    }
    return 0;
}

int tf_ulp_format_and_model(const tf_codec_ctx *ctx, size_t len, ulp_format *f,
                            tf_rans_table *t, tf_error *e)
{
    return tf_ulp_format_of(ctx, len, f, e) < 0 ? -1 : read_model(ctx, f, t, e);
}

int tf_ulp_model_of(const tf_codec_ctx *ctx, ulp_format *f, tf_rans_table *t, tf_error *e)
{
    return format_of_dtype(ctx->dtype, f, e) < 0 ? -1 : read_model(ctx, f, t, e);
}

int tf_ulp_read_model(const tf_codec_ctx *ctx, size_t len, tf_rans_table *t, tf_error *e)
{
    ulp_format f;
    return tf_ulp_format_and_model(ctx, len, &f, t, e);
}

/* Every delta is fitted on its chunk. */
static bool fits_chunks_of(unsigned dtype)
{
    (void)dtype;
    return true;
}

const tf_codec tf_codec_ulp = {
    .id = TF_CODEC_ULP,
    .name = "ulp",
    .delta = true,
    .needs_model = true,
    .fit = tf_ulp_fit,
    .fits_chunks_of = fits_chunks_of,
    .fit_encode = tf_ulp_fit_encode,
    .estimate = tf_ulp_estimate,
    .prepare = tf_ulp_prepare,
    .prepared_free = tf_ulp_prepared_free,
    .encode = tf_ulp_encode,
    .encode_pair = tf_ulp_encode_pair,
    .decode = tf_ulp_decode,
};
