#include "store/blob_stats.h"

#include <errno.h>
#include <stdlib.h>

#include "codec/prog/prog.h"
#include "store/blob_io.h"

struct tf_ulp_blobs {
    tf_reader_ctx *reader;
    tf_buf payload, ref, model;
    uint64_t model_of; /* blob index + 1 of what `model` holds */
};

tf_ulp_blobs *tf_ulp_blobs_new(tf_reader_ctx *r)
{
    tf_ulp_blobs *u = calloc(1, sizeof *u);
    if (u)
        u->reader = r;
    return u;
}

void tf_ulp_blobs_free(tf_ulp_blobs *u)
{
    if (!u)
        return;
    tf_buf_free(&u->payload);
    tf_buf_free(&u->ref);
    tf_buf_free(&u->model);
    free(u);
}

/* Blob idx reconstructed into buf. */
static int reconstruct(tf_ulp_blobs *u, uint64_t idx, tf_buf *buf, tf_error *e)
{
    tf_blob b;
    if (tf_archive_blob(tf_reader_archive(u->reader), idx, &b, e) < 0)
        return -1;
    uint64_t len = b.raw_len;
    buf->len = 0;
    uint8_t *p = len <= SIZE_MAX ? tf_buf_reserve(buf, (size_t)len) : NULL;
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory for %llu bytes", (unsigned long long)len);
    if (tf_reader_blob(u->reader, idx, p, e) < 0)
        return -1;
    tf_buf_commit(buf, (size_t)len);
    return 0;
}

int tf_ulp_blobs_breakdown(tf_ulp_blobs *u, uint64_t b, tf_ulp_bits *bits, tf_error *e)
{
    tf_archive *ar = tf_reader_archive(u->reader);
    tf_blob rec;
    if (tf_archive_blob(ar, b, &rec, e) < 0)
        return -1;
    const tf_blob *blob = &rec;
    if (!blob->ref || !blob->model)
        return tf_fail(e, EIO, "a ulp blob needs a reference and a model");
    if (u->model_of != blob->model) {
        u->model_of = 0;
        if (reconstruct(u, blob->model - 1, &u->model, e) < 0)
            return -1;
        u->model_of = blob->model;
    }
    if (reconstruct(u, blob->ref - 1, &u->ref, e) < 0 ||
        tf_blob_read_payload(ar, blob, &u->payload, e) < 0)
        return -1;
    tf_codec_ctx ctx = { .dtype = blob->dtype, .ref = u->ref.data, .ref_len = u->ref.len,
                         .model = u->model.data, .model_len = u->model.len };
    return tf_ulp_breakdown(u->payload.data, u->payload.len, &ctx, (size_t)blob->raw_len,
                            bits, e);
}

int tf_blob_program_text(tf_archive *ar, uint64_t b, tf_buf *payload, char *out, size_t outsz,
                         tf_error *e)
{
    tf_blob blob;
    if (tf_archive_blob(ar, b, &blob, e) < 0 || tf_blob_read_payload(ar, &blob, payload, e) < 0)
        return -1;
    if (tf_prog_describe_chunk(payload->data, payload->len, blob.dtype, (size_t)blob.raw_len,
                               out, outsz) < 0)
        return tf_fail(e, EIO, "not a valid program");
    return 0;
}
