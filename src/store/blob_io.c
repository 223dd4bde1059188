#include "store/blob_io.h"

#include <errno.h>
#include <stdint.h>

#include "format/container.h"

int tf_blob_read_payload(tf_archive *ar, const tf_blob *b, tf_buf *out, tf_error *e)
{
    out->len = 0;
    uint8_t *p = b->enc_len <= SIZE_MAX ? tf_buf_reserve(out, (size_t)b->enc_len) : NULL;
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory for %llu bytes", (unsigned long long)b->enc_len);
    int rc = tf_container_pread_checked(tf_archive_container(ar), b->offset, p, (size_t)b->enc_len,
                                        b->enc_hash, e);
    if (rc < 0)
        return -1;
    if (rc > 0)
        return tf_fail(e, EIO, "checksum mismatch (stored bytes are damaged)");
    tf_buf_commit(out, (size_t)b->enc_len);
    return 0;
}

void tf_blob_will_need(tf_archive *ar, const tf_blob *b)
{
    tf_container_will_need(tf_archive_container(ar), b->offset, b->enc_len);
}
