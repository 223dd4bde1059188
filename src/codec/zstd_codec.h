/* zstd: one zstd frame of the chunk (opaque files, non-float tensors). */
#ifndef TRAJFS_CODEC_ZSTD_CODEC_H
#define TRAJFS_CODEC_ZSTD_CODEC_H

#include "codec/codec.h"

extern const tf_codec tf_codec_zstd;

/* Shared with the byte-grouping codec: compress/decompress one frame whose
 * content size must be exactly len. */
int tf_zstd_compress(const uint8_t *src, size_t len, int level, tf_buf *out, tf_error *e);
int tf_zstd_decompress(const uint8_t *enc, size_t enc_len, uint8_t *dst, size_t len, tf_error *e);

#endif
