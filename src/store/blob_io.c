#include "store/blob_io.h"

#include <errno.h>
#include <stdbool.h>
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

void tf_blob_hints_add(tf_archive *ar, tf_blob_hints *h, const tf_blob *b)
{
    if (h->n == TF_BLOB_HINTS_MAX)
        tf_blob_hints_send(ar, h);
    h->r[h->n++] = (tf_archive_range){ .off = b->offset, .len = b->enc_len };
}

/* Ranges this close are hinted as one: the pages between them are read
 * whole anyway, or nearly. */
#define HINT_GAP ((uint64_t)4096)

void tf_blob_hints_send(tf_archive *ar, tf_blob_hints *h)
{
    tf_container *c = tf_archive_container(ar);
    /* A remote archive's disk cache keeps ranges as they were hinted and
     * serves exactly those: merged ones, which differ with what the
     * memory cache held at the time, would miss it in the next mount. */
    const bool merge = !tf_archive_is_remote(ar);
    tf_archive_ranges_sort(h->r, h->n);
    for (size_t i = 0; i < h->n;) {
        uint64_t off = h->r[i].off, end = off + h->r[i].len;
        for (i++; merge && i < h->n && h->r[i].off <= end + HINT_GAP; i++)
            if (h->r[i].off + h->r[i].len > end)
                end = h->r[i].off + h->r[i].len;
        tf_container_will_need(c, off, end - off);
    }
    h->n = 0;
}
