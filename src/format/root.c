#include "format/root.h"

#include <errno.h>
#include <string.h>

/* The tallest entries tree: 2^32 entries in leaves of one at fanout 2. */
#define ENTRIES_HEIGHT_MAX 32

int tf_root_encode(const tf_root *r, tf_buf *out, tf_error *e)
{
    uint8_t rec[TF_ROOT_RECORD_SIZE] = { 0 }, *p = rec;
    const uint64_t counts[] = { r->seq, r->nblobs, r->next_ino, r->nentries, r->retired_bytes };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++, p += 8)
        tf_le64_put(p, counts[i]);
    for (size_t i = 0; i < TF_ROOT_WINDOW; i++, p += 8)
        tf_le64_put(p, r->window[i]);
    const tf_page_ref *refs[] = { &r->blobs, &r->entries, &r->retired };
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++, p += TF_PAGE_REF_SIZE)
        tf_page_ref_put(p, refs[i]);
    *p = r->entries_height; /* then 11 reserved zero bytes */
    return tf_page_raw(TF_PAGE_ROOT, 0, 1, rec, sizeof rec, out, e);
}

/* The rules a root's fields keep among themselves. */
static int check_root(const tf_root *r, const uint8_t *reserved, size_t nreserved, tf_error *e)
{
    for (size_t i = 0; i < nreserved; i++)
        if (reserved[i])
            return tf_fail(e, EIO, "root of commit %llu: reserved bytes are not zero",
                           (unsigned long long)r->seq);
    const char *why = !r->seq                                   ? "no commit number"
                      : r->next_ino < 2                         ? "inode numbers below 2"
                      : (r->blobs.len != 0) != (r->nblobs != 0) ? "blob tree and count disagree"
                      : (r->entries.len != 0) != (r->nentries != 0)
                          ? "entries tree and count disagree"
                      : r->entries_height > ENTRIES_HEIGHT_MAX ? "entries tree too tall"
                                                               : NULL;
    for (size_t i = 0; !why && i < TF_ROOT_WINDOW; i++)
        if (r->window[i] > r->nblobs || (i && r->window[i] < r->window[i - 1]))
            why = "window out of order";
    return why ? tf_fail(e, EIO, "root of commit %llu: %s", (unsigned long long)r->seq, why) : 0;
}

int tf_root_read(const tf_page_source *src, const tf_page_ref *ref, tf_root *r, tf_error *e)
{
    tf_page pg;
    if (tf_page_read(src, ref, TF_PAGE_ROOT, 0, &pg, e) < 0)
        return -1;
    if (pg.count != 1 || pg.len != TF_ROOT_RECORD_SIZE) {
        tf_page_free(&pg);
        return tf_fail(e, EIO, "root page at %llu: %zu bytes, expected %d",
                       (unsigned long long)ref->off, pg.len, TF_ROOT_RECORD_SIZE);
    }
    const uint8_t *p = pg.data;
    uint64_t *counts[] = { &r->seq, &r->nblobs, &r->next_ino, &r->nentries, &r->retired_bytes };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++, p += 8)
        *counts[i] = tf_le64_get(p);
    for (size_t i = 0; i < TF_ROOT_WINDOW; i++, p += 8)
        r->window[i] = tf_le64_get(p);
    tf_page_ref *refs[] = { &r->blobs, &r->entries, &r->retired };
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++, p += TF_PAGE_REF_SIZE)
        *refs[i] = tf_page_ref_get(p);
    r->entries_height = *p++;
    int rc = check_root(r, p, (size_t)(pg.data + pg.len - p), e);
    tf_page_free(&pg);
    return rc;
}
