/* One zstd frame: the codecs' (codec/zstd_codec.c, the byte-grouping
 * codec) and the catalog's (format/container.c), each with a context that
 * the calling thread keeps. */
#ifndef TRAJFS_COMMON_ZSTD_FRAME_H
#define TRAJFS_COMMON_ZSTD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

/* Compresses len bytes at src into one frame at the end of out. */
int tf_zstd_compress(const uint8_t *src, size_t len, int level, tf_buf *out, tf_error *e);
/* Decompresses one frame whose content size must be exactly len. */
int tf_zstd_decompress(const uint8_t *enc, size_t enc_len, uint8_t *dst, size_t len, tf_error *e);

#endif
