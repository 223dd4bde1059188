#include "common/dtype.h"

#include <string.h>

static const tf_dtype_info infos[TF_DT_COUNT] = {
    [TF_DT_NONE] = { "bytes", 1, 0, 0 },
    [TF_DT_BOOL] = { "BOOL", 1, 0, 0 },
    [TF_DT_U8] = { "U8", 1, 0, 0 },
    [TF_DT_I8] = { "I8", 1, 0, 0 },
    [TF_DT_I16] = { "I16", 2, 0, 0 },
    [TF_DT_U16] = { "U16", 2, 0, 0 },
    [TF_DT_I32] = { "I32", 4, 0, 0 },
    [TF_DT_U32] = { "U32", 4, 0, 0 },
    [TF_DT_I64] = { "I64", 8, 0, 0 },
    [TF_DT_U64] = { "U64", 8, 0, 0 },
    [TF_DT_F16] = { "F16", 2, 5, 10 },
    [TF_DT_BF16] = { "BF16", 2, 8, 7 },
    [TF_DT_F32] = { "F32", 4, 8, 23 },
    [TF_DT_F64] = { "F64", 8, 11, 52 },
    [TF_DT_F8_E4M3] = { "F8_E4M3", 1, 4, 3 },
    [TF_DT_F8_E5M2] = { "F8_E5M2", 1, 5, 2 },
};

const tf_dtype_info *tf_dtype_get(unsigned dt)
{
    return dt < TF_DT_COUNT ? &infos[dt] : NULL;
}

tf_dtype tf_dtype_from_name(const char *name, size_t len)
{
    for (unsigned dt = TF_DT_BOOL; dt < TF_DT_COUNT; dt++)
        if (strlen(infos[dt].name) == len && memcmp(infos[dt].name, name, len) == 0)
            return (tf_dtype)dt;
    return TF_DT_NONE;
}
