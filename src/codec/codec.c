#include "codec/codec.h"

#include <string.h>

#include "codec/bytegroup.h"
#include "codec/keyframe.h"
#include "codec/prog/prog.h"
#include "codec/raw.h"
#include "codec/ulp/ulp.h"
#include "codec/zstd_codec.h"
#include "common/dtype.h"

static const tf_codec *const table[TF_CODEC_COUNT] = {
    [TF_CODEC_RAW] = &tf_codec_raw,
    [TF_CODEC_ZSTD] = &tf_codec_zstd,
    [TF_CODEC_BYTEGROUP] = &tf_codec_bytegroup,
    [TF_CODEC_ULP] = &tf_codec_ulp,
    [TF_CODEC_PROG] = &tf_codec_prog,
    [TF_CODEC_KEYFRAME] = &tf_codec_keyframe,
};

const tf_codec *tf_codec_get(unsigned id)
{
    return id < TF_CODEC_COUNT ? table[id] : NULL;
}

const tf_codec *tf_codec_by_name(const char *name)
{
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++)
        if (table[id] && strcmp(table[id]->name, name) == 0)
            return table[id];
    return NULL;
}

tf_codec_id tf_codec_newest_keyframe(uint8_t dtype)
{
    if (tf_keyframe_dtype(dtype))
        return TF_CODEC_KEYFRAME;
    /* F64: its exponent bytes grouped (bytegroup); other dtypes, one byte
     * or integers: zstd, as the writer's choice among codecs has them */
    return tf_dtype_is_wide_float(dtype) ? TF_CODEC_BYTEGROUP : TF_CODEC_ZSTD;
}
