#include "format/page.h"

#include <errno.h>
#include <stdlib.h>
#include <zstd.h>

#include "common/hash.h"
#include "common/zstd_frame.h"

/* Pages are written once and read many times, mostly small: a level
 * between the segments' speed and zstd's best. */
#define PAGE_ZSTD_LEVEL 3

/* As a catalog segment's (format/container.c). */
#define BODY_MAX_RATIO 256

size_t tf_page_max(tf_page_kind kind, size_t stored_len)
{
    switch (kind) {
    case TF_PAGE_ENTRY_LEAF:
        return TF_PAGE_MAX_ENTRIES;
    case TF_PAGE_BODY:
    case TF_PAGE_RETIRED:
        return stored_len * BODY_MAX_RATIO + 4096;
    default:
        return TF_PAGE_MAX;
    }
}

void tf_page_ref_put(uint8_t *p, const tf_page_ref *r)
{
    tf_le64_put(p, r->off);
    tf_le32_put(p + 8, r->len);
    tf_le64_put(p + 12, r->hash);
}

tf_page_ref tf_page_ref_get(const uint8_t *p)
{
    return (tf_page_ref){ .off = tf_le64_get(p), .len = tf_le32_get(p + 8),
                          .hash = tf_le64_get(p + 12) };
}

int tf_page_raw(tf_page_kind kind, unsigned level, uint32_t count, const void *records,
                size_t len, tf_buf *out, tf_error *e)
{
    if ((kind != TF_PAGE_BODY && kind != TF_PAGE_RETIRED &&
         len > tf_page_max(kind, 0) - TF_PAGE_HEADER_SIZE) ||
        level > UINT8_MAX)
        return tf_fail(e, EINVAL, "page of kind %d: %zu bytes of records do not fit", (int)kind,
                       len);
    out->len = 0;
    uint8_t *h = tf_buf_reserve(out, TF_PAGE_HEADER_SIZE + len);
    if (!h)
        return tf_fail(e, ENOMEM, "page: out of memory");
    h[0] = (uint8_t)kind;
    h[1] = (uint8_t)level;
    h[2] = h[3] = 0;
    tf_le32_put(h + 4, count);
    if (len)
        memcpy(h + TF_PAGE_HEADER_SIZE, records, len);
    tf_buf_commit(out, TF_PAGE_HEADER_SIZE + len);
    return 0;
}

int tf_page_encode(tf_page_kind kind, unsigned level, uint32_t count, const void *records,
                   size_t len, tf_buf *out, tf_error *e)
{
    tf_buf raw = { 0 };
    int rc = tf_page_raw(kind, level, count, records, len, &raw, e);
    out->len = 0;
    if (rc == 0)
        rc = tf_zstd_compress(raw.data, raw.len, PAGE_ZSTD_LEVEL, out, e);
    tf_buf_free(&raw);
    if (rc == 0 && out->len > UINT32_MAX)
        rc = tf_fail(e, EFBIG, "page of kind %d: %zu stored bytes", (int)kind, out->len);
    return rc;
}

int tf_page_write(const tf_page_sink *sink, tf_page_kind kind, unsigned level, uint32_t count,
                  const void *records, size_t len, tf_page_ref *ref, tf_error *e)
{
    tf_buf stored = { 0 };
    int rc = tf_page_encode(kind, level, count, records, len, &stored, e);
    if (rc == 0) {
        *ref = (tf_page_ref){ .len = (uint32_t)stored.len,
                              .hash = tf_hash64(stored.data, stored.len) };
        rc = sink->append(sink->ctx, stored.data, stored.len, &ref->off, e);
    }
    tf_buf_free(&stored);
    return rc;
}

/* Reads and checks the stored bytes of ref into a new buffer. */
static uint8_t *read_stored(const tf_page_source *src, const tf_page_ref *ref, size_t max,
                            tf_error *e)
{
    const uint64_t size = src->size(src->ctx);
    if (!ref->len || ref->len > ZSTD_compressBound(max) || ref->off > size ||
        ref->len > size - ref->off) {
        tf_fail(e, EIO, "page at %llu: stored length %u out of range",
                (unsigned long long)ref->off, ref->len);
        return NULL;
    }
    uint8_t *stored = malloc(ref->len);
    if (!stored) {
        tf_fail(e, ENOMEM, "page: out of memory");
        return NULL;
    }
    int rc = src->read(src->ctx, ref->off, stored, ref->len, ref->hash, e);
    if (rc == 0)
        return stored;
    if (rc > 0)
        tf_fail(e, EIO, "page at %llu: checksum mismatch", (unsigned long long)ref->off);
    free(stored);
    return NULL;
}

int tf_page_read(const tf_page_source *src, const tf_page_ref *ref, tf_page_kind kind,
                 unsigned level, tf_page *pg, tf_error *e)
{
    const size_t max = tf_page_max(kind, ref->len);
    uint8_t *stored = read_stored(src, ref, max, e);
    if (!stored)
        return -1;
    uint8_t *raw = NULL;
    unsigned long long n = ZSTD_getFrameContentSize(stored, ref->len);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n < TF_PAGE_HEADER_SIZE ||
        n > max) {
        tf_fail(e, EIO, "page at %llu: bad frame", (unsigned long long)ref->off);
        goto fail;
    }
    raw = malloc(n);
    if (!raw) {
        tf_fail(e, ENOMEM, "page: out of memory");
        goto fail;
    }
    if (tf_zstd_decompress(stored, ref->len, raw, n, e) < 0) {
        tf_error_prefix(e, "page at %llu", (unsigned long long)ref->off);
        goto fail;
    }
    if (raw[0] != kind || raw[1] != level) {
        tf_fail(e, EIO, "page at %llu: kind %u level %u where kind %d level %u was expected",
                (unsigned long long)ref->off, raw[0], raw[1], (int)kind, level);
        goto fail;
    }
    if (raw[2] || raw[3]) {
        tf_fail(e, EIO, "page at %llu: reserved bytes are not zero", (unsigned long long)ref->off);
        goto fail;
    }
    free(stored);
    *pg = (tf_page){ .kind = raw[0], .level = raw[1], .count = tf_le32_get(raw + 4), .data = raw,
                     .len = (size_t)n - TF_PAGE_HEADER_SIZE };
    memmove(raw, raw + TF_PAGE_HEADER_SIZE, pg->len);
    return 0;
fail:
    free(stored);
    free(raw);
    return -1;
}

void tf_page_free(tf_page *pg)
{
    free(pg->data);
    pg->data = NULL;
}
