#include "store/blob_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include "common/hash.h"
#include "format/container.h"

int tf_blob_read_payload(tf_archive *ar, const tf_blob *b, tf_buf *out, tf_error *e)
{
    out->len = 0;
    uint8_t *p = b->enc_len <= SIZE_MAX ? tf_buf_reserve(out, (size_t)b->enc_len) : NULL;
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory for %llu bytes", (unsigned long long)b->enc_len);
    if (tf_container_pread(tf_archive_container(ar), b->offset, p, (size_t)b->enc_len, e) < 0)
        return -1;
    if (tf_hash64(p, (size_t)b->enc_len) != b->enc_hash)
        return tf_fail(e, EIO, "checksum mismatch (stored bytes are damaged)");
    tf_buf_commit(out, (size_t)b->enc_len);
    return 0;
}

void tf_blob_will_need(tf_archive *ar, const tf_blob *b)
{
    if (b->enc_len && b->offset <= INT64_MAX && b->enc_len <= INT64_MAX - b->offset)
        (void)posix_fadvise(tf_archive_container(ar)->fd, (off_t)b->offset, (off_t)b->enc_len,
                            POSIX_FADV_WILLNEED);
}
