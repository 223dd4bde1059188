#include "codec_input.h"

#include "common/dtype.h"

#define HEAD_BYTES 6

size_t tf_fuzz_codecs(const tf_codec *out[TF_FUZZ_CODECS_MAX])
{
    size_t n = 0;
    for (unsigned id = 0; id < 256 && n < TF_FUZZ_CODECS_MAX; id++)
        if (tf_codec_get(id))
            out[n++] = tf_codec_get(id);
    return n;
}

static const tf_codec *codec_by_id(unsigned id)
{
    const tf_codec *all[TF_FUZZ_CODECS_MAX];
    size_t n = tf_fuzz_codecs(all);
    for (size_t i = 0; i < n; i++)
        if (all[i]->id == id)
            return all[i];
    return NULL;
}

int tf_fuzz_codec_unpack(const uint8_t *p, size_t n, tf_fuzz_codec_input *in)
{
    if (n < HEAD_BYTES)
        return -1;
    const tf_codec *codec = codec_by_id(p[0]);
    const tf_dtype_info *dt = tf_dtype_get(p[1]);
    if (!codec || !dt)
        return -1;
    size_t len = (size_t)(p[2] | p[3] << 8) * dt->size;
    size_t model_len = (size_t)(p[4] | p[5] << 8);
    size_t ref_len = codec->delta ? len : 0;
    if (n - HEAD_BYTES < model_len || n - HEAD_BYTES - model_len < ref_len)
        return -1;
    const uint8_t *model = p + HEAD_BYTES, *ref = model + model_len;
    *in = (tf_fuzz_codec_input){
        .codec = codec,
        .ctx = { .dtype = p[1], .ref = ref_len ? ref : NULL, .ref_len = ref_len,
                 .model = model_len ? model : NULL, .model_len = model_len },
        .len = len,
        .payload = ref + ref_len,
        .payload_len = n - HEAD_BYTES - model_len - ref_len,
    };
    return 0;
}

int tf_fuzz_codec_pack(const tf_fuzz_codec_input *in, tf_buf *out)
{
    const tf_dtype_info *dt = tf_dtype_get(in->ctx.dtype);
    size_t elems = dt ? in->len / dt->size : 0;
    if (!dt || elems > UINT16_MAX || in->ctx.model_len > UINT16_MAX || elems * dt->size != in->len ||
        (in->codec->delta && in->ctx.ref_len != in->len))
        return -1;
    uint8_t head[HEAD_BYTES] = { in->codec->id, (uint8_t)in->ctx.dtype,
                                 (uint8_t)elems, (uint8_t)(elems >> 8),
                                 (uint8_t)in->ctx.model_len, (uint8_t)(in->ctx.model_len >> 8) };
    int rc = tf_buf_put(out, head, sizeof head);
    if (in->ctx.model_len)
        rc |= tf_buf_put(out, in->ctx.model, in->ctx.model_len);
    if (in->codec->delta)
        rc |= tf_buf_put(out, in->ctx.ref, in->ctx.ref_len);
    return rc | tf_buf_put(out, in->payload, in->payload_len);
}
