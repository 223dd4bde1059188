#include "common/buf.h"

#include <stdlib.h>
#include <string.h>

void tf_buf_free(tf_buf *b)
{
    free(b->data);
    *b = (tf_buf){ 0 };
}

uint8_t *tf_buf_reserve(tf_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len)
        return NULL;
    if (b->len + n > b->cap || !b->data) { /* never NULL + 0 for n == 0 */
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        uint8_t *d;
        if (b->len) {
            d = realloc(b->data, cap);
        } else { /* nothing to keep: a realloc would copy the old block */
            free(b->data);
            *b = (tf_buf){ 0 };
            d = malloc(cap);
        }
        if (!d)
            return NULL;
        b->data = d;
        b->cap = cap;
    }
    return b->data + b->len;
}

void tf_buf_commit(tf_buf *b, size_t n)
{
    b->len += n;
}

int tf_buf_put(tf_buf *b, const void *p, size_t n)
{
    uint8_t *d = tf_buf_reserve(b, n);
    if (!d)
        return -1;
    if (n)
        memcpy(d, p, n);
    b->len += n;
    return 0;
}

int tf_buf_u8(tf_buf *b, uint8_t v)
{
    return tf_buf_put(b, &v, 1);
}

int tf_buf_u32(tf_buf *b, uint32_t v)
{
    uint8_t t[4];
    tf_le32_put(t, v);
    return tf_buf_put(b, t, 4);
}

int tf_buf_u64(tf_buf *b, uint64_t v)
{
    uint8_t t[8];
    tf_le64_put(t, v);
    return tf_buf_put(b, t, 8);
}

int tf_buf_varint(tf_buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    return tf_buf_put(b, t, n);
}

const uint8_t *tf_read_bytes(tf_cursor *r, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint8_t tf_read_u8(tf_cursor *r)
{
    const uint8_t *p = tf_read_bytes(r, 1);
    return p ? p[0] : 0;
}

uint32_t tf_read_u32(tf_cursor *r)
{
    const uint8_t *p = tf_read_bytes(r, 4);
    return p ? tf_le32_get(p) : 0;
}

uint64_t tf_read_u64(tf_cursor *r)
{
    const uint8_t *p = tf_read_bytes(r, 8);
    return p ? tf_le64_get(p) : 0;
}

/* Reads the bytes in place, bounded once by those left, where a read of
 * each (tf_read_bytes) checked them again and again. A bad varint leaves
 * the cursor as far as it read, as such a read did. */
uint64_t tf_read_varint_long(tf_cursor *r)
{
    size_t left = tf_cursor_left(r), n = left < 10 ? left : 10;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t byte = r->p[r->pos + i];
        uint64_t part = byte & 0x7f;
        if (i == 9 && part > 1) /* would overflow 64 bits */
            break;
        v |= part << (7 * i);
        if (!(byte & 0x80)) {
            r->pos += i + 1;
            return v;
        }
    }
    r->pos += n;
    r->bad = true;
    return 0;
}
