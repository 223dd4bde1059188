/* Element types of tensors (named as safetensors names them), as stored
 * in the archive (the numeric values are part of the archive format:
 * never renumber). */
#ifndef TRAJFS_COMMON_DTYPE_H
#define TRAJFS_COMMON_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    TF_DT_NONE = 0, /* opaque bytes, not a tensor */
    TF_DT_BOOL = 1,
    TF_DT_U8 = 2,
    TF_DT_I8 = 3,
    TF_DT_I16 = 4,
    TF_DT_U16 = 5,
    TF_DT_I32 = 6,
    TF_DT_U32 = 7,
    TF_DT_I64 = 8,
    TF_DT_U64 = 9,
    TF_DT_F16 = 10,
    TF_DT_BF16 = 11,
    TF_DT_F32 = 12,
    TF_DT_F64 = 13,
    TF_DT_F8_E4M3 = 14,
    TF_DT_F8_E5M2 = 15,
    TF_DT_COUNT
} tf_dtype;

typedef struct {
    const char *name;  /* safetensors spelling, e.g. "BF16" */
    unsigned size;     /* bytes per element (1 for TF_DT_NONE) */
    unsigned exp_bits; /* IEEE exponent field width, 0 for non-floats */
    unsigned man_bits; /* IEEE mantissa field width, 0 for non-floats */
} tf_dtype_info;

/* NULL for values outside the enum (e.g. read from a hostile archive). */
const tf_dtype_info *tf_dtype_get(unsigned dt);
/* Parses a safetensors dtype name; TF_DT_NONE when unknown. */
tf_dtype tf_dtype_from_name(const char *name, size_t len);
static inline bool tf_dtype_is_float(unsigned dt)
{
    return dt >= TF_DT_F16 && dt <= TF_DT_F8_E5M2;
}
/* Floats of two bytes or more: the elements whose bytes are worth
 * grouping by significance (codec/bytegroup.h). */
static inline bool tf_dtype_is_wide_float(unsigned dt)
{
    return tf_dtype_is_float(dt) && tf_dtype_get(dt)->size >= 2;
}

#endif
