/* zstd: one zstd frame of the chunk (opaque files, non-float tensors). */
#ifndef TRAJFS_CODEC_ZSTD_CODEC_H
#define TRAJFS_CODEC_ZSTD_CODEC_H

#include <stdbool.h>

#include "codec/codec.h"

extern const tf_codec tf_codec_zstd;

/* The bytes one frame of the n elements of `bytes` bytes at src takes at
 * level, estimated by compressing their sample (codec/sample.h), first
 * rearranged by `arrange` (from its m elements to dst) when not NULL, as
 * the byte-grouping codec does; SIZE_MAX when out of memory. */
typedef void tf_zstd_arrange(const uint8_t *src, size_t m, unsigned bytes, uint8_t *dst);
size_t tf_zstd_estimate(const uint8_t *src, size_t n, unsigned bytes, tf_zstd_arrange *arrange,
                        int level);

#endif
