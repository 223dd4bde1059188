/* The input of the codec fuzz target, shared by the target and the seed
 * generator (make_seeds.c) so both agree on one layout:
 *
 *   u8 codec id | u8 dtype | u16 elements | u16 model bytes | model |
 *   reference (elements x dtype size bytes; delta codecs only) | payload
 *
 * Integers are little-endian. The payload is decoded into elements x
 * dtype size bytes: a delta codec against the reference, a codec with a
 * fit step with the model (none when the model is empty). */
#ifndef TRAJFS_TESTS_FUZZ_CODEC_INPUT_H
#define TRAJFS_TESTS_FUZZ_CODEC_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/buf.h"

#define TF_FUZZ_CODECS_MAX 16

typedef struct {
    const tf_codec *codec;
    tf_codec_ctx ctx;
    size_t len; /* bytes to decode */
    const uint8_t *payload;
    size_t payload_len;
} tf_fuzz_codec_input;

/* The codecs fuzzed: every codec of the table. */
size_t tf_fuzz_codecs(const tf_codec *out[TF_FUZZ_CODECS_MAX]);

/* 0, or -1 when the bytes are not a codec input (unknown codec or dtype,
 * too short): the input points into p. */
int tf_fuzz_codec_unpack(const uint8_t *p, size_t n, tf_fuzz_codec_input *in);
/* Appends the layout above; 0 or -1 (out of memory, too large). */
int tf_fuzz_codec_pack(const tf_fuzz_codec_input *in, tf_buf *out);

#endif
