#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_input.h"
#include "fuzz_targets.h"

/* A chunk that decoded is a chunk the codec can produce: when the codec
 * encodes it again under the same reference and model, that encoding
 * must decode to the same bytes. */
static void check_reencoding(const tf_fuzz_codec_input *in, const uint8_t *chunk)
{
    tf_buf enc = { 0 };
    uint8_t *again = malloc(in->len ? in->len : 1);
    tf_error e = { 0 };
    if (again && in->codec->encode(chunk, in->len, &in->ctx, &enc, NULL) == 0 &&
        (in->codec->decode(enc.data, enc.len, &in->ctx, again, in->len, &e) < 0 ||
         memcmp(again, chunk, in->len) != 0)) {
        fprintf(stderr, "codec %s: a re-encoded chunk of %zu bytes does not decode back: %s\n",
                in->codec->name, in->len, e.msg[0] ? e.msg : "bytes differ");
        abort();
    }
    free(again);
    tf_buf_free(&enc);
}

int tf_fuzz_codec(const uint8_t *data, size_t size, tf_error *e)
{
    tf_fuzz_codec_input in;
    if (tf_fuzz_codec_unpack(data, size, &in) < 0)
        return tf_fail(e, EINVAL, "not a codec input");
    uint8_t *chunk = malloc(in.len ? in.len : 1);
    if (!chunk)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = in.codec->decode(in.payload, in.payload_len, &in.ctx, chunk, in.len, e);
    if (rc == 0)
        check_reencoding(&in, chunk);
    free(chunk);
    return rc;
}
