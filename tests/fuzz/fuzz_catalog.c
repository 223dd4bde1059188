#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/catalog.h"
#include "format/container.h"
#include "fuzz_targets.h"

#define FILE_END ((uint64_t)1 << 40) /* blob offsets anywhere below */

static void broken(const char *what, const tf_error *e)
{
    fprintf(stderr, "catalog: an accepted segment %s%s%s\n", what, e->msg[0] ? ": " : "", e->msg);
    abort();
}

int tf_fuzz_catalog(const uint8_t *data, size_t size, tf_error *e)
{
    if (size < 3)
        return tf_fail(e, EINVAL, "not a catalog input");
    unsigned shift = TF_CHUNK_SHIFT_MIN + data[0] % (TF_CHUNK_SHIFT_MAX - TF_CHUNK_SHIFT_MIN + 1);
    uint64_t first_blob = (uint64_t)data[1] | (uint64_t)data[2] << 8;
    tf_segment seg, again;
    if (tf_segment_decode(data + 3, size - 3, first_blob, shift, FILE_END, &seg, e) < 0)
        return -1;
    /* Encoding what was accepted gives a segment that decodes, and whose
     * encoding is the same bytes again. */
    tf_buf once = { 0 }, twice = { 0 };
    tf_error e2 = { 0 };
    if (tf_segment_encode(&seg, &once, &e2) < 0)
        broken("does not encode", &e2);
    if (tf_segment_decode(once.data, once.len, first_blob, shift, FILE_END, &again, &e2) < 0)
        broken("does not decode once encoded", &e2);
    if (tf_segment_encode(&again, &twice, &e2) < 0 || twice.len != once.len ||
        memcmp(twice.data, once.data, once.len) != 0)
        broken("changes when encoded twice", &e2);
    tf_segment_free(&again);
    tf_segment_free(&seg);
    tf_buf_free(&once);
    tf_buf_free(&twice);
    return 0;
}
