/* Growable byte buffer for writing, bounded cursor for reading.
 * Integers are little-endian; varints are LEB128 (7 bits per byte). */
#ifndef TRAJFS_COMMON_BUF_H
#define TRAJFS_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t   len, cap;
} tf_buf;

void tf_buf_free(tf_buf *b);
/* Makes room for n more bytes; returns a pointer to them, NULL when out of
 * memory. The caller writes them and then calls tf_buf_commit(b, n). */
uint8_t *tf_buf_reserve(tf_buf *b, size_t n);
void tf_buf_commit(tf_buf *b, size_t n);
int tf_buf_put(tf_buf *b, const void *p, size_t n);  /* 0 or -1 (ENOMEM) */
int tf_buf_u8(tf_buf *b, uint8_t v);
int tf_buf_u32(tf_buf *b, uint32_t v);
int tf_buf_u64(tf_buf *b, uint64_t v);
int tf_buf_varint(tf_buf *b, uint64_t v);

/* Little-endian loads and stores: one move where the host is
 * little-endian (the byte loops do not always compile to one). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TF_LE_HOST 1
#else
#define TF_LE_HOST 0
#endif

static inline void tf_le16_put(uint8_t *p, uint16_t v)
{
    if (TF_LE_HOST) {
        memcpy(p, &v, 2);
        return;
    }
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void tf_le32_put(uint8_t *p, uint32_t v)
{
    if (TF_LE_HOST) {
        memcpy(p, &v, 4);
        return;
    }
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tf_le64_put(uint8_t *p, uint64_t v)
{
    if (TF_LE_HOST) {
        memcpy(p, &v, 8);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t tf_le16_get(const uint8_t *p)
{
    uint16_t v;
    if (TF_LE_HOST) {
        memcpy(&v, p, 2);
        return v;
    }
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t tf_le32_get(const uint8_t *p)
{
    uint32_t v = 0;
    if (TF_LE_HOST) {
        memcpy(&v, p, 4);
        return v;
    }
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t tf_le64_get(const uint8_t *p)
{
    uint64_t v = 0;
    if (TF_LE_HOST) {
        memcpy(&v, p, 8);
        return v;
    }
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
/* An element of 1, 2, 4 or 8 bytes; a constant `bytes` makes it one move. */
static inline uint64_t tf_le_get(const uint8_t *p, unsigned bytes)
{
    switch (bytes) {
    case 1: return p[0];
    case 2: return tf_le16_get(p);
    case 4: return tf_le32_get(p);
    default: return tf_le64_get(p);
    }
}
static inline void tf_le_put(uint8_t *p, uint64_t v, unsigned bytes)
{
    switch (bytes) {
    case 1: p[0] = (uint8_t)v; break;
    case 2: tf_le16_put(p, (uint16_t)v); break;
    case 4: tf_le32_put(p, (uint32_t)v); break;
    default: tf_le64_put(p, v); break;
    }
}

/* Reading never goes past len: a short read sets `bad`, returns zeros, and
 * every later read fails too, so a parser checks `bad` once at the end of a
 * record instead of after every field. */
typedef struct {
    const uint8_t *p;
    size_t len, pos;
    bool   bad;
} tf_cursor;

static inline tf_cursor tf_cursor_make(const void *p, size_t len)
{
    return (tf_cursor){ .p = p, .len = len, .pos = 0, .bad = false };
}
static inline size_t tf_cursor_left(const tf_cursor *r)
{
    return r->bad ? 0 : r->len - r->pos;
}
const uint8_t *tf_read_bytes(tf_cursor *r, size_t n); /* NULL when short */
uint8_t  tf_read_u8(tf_cursor *r);
uint32_t tf_read_u32(tf_cursor *r);
uint64_t tf_read_u64(tf_cursor *r);
/* Rejects > 10 bytes or overflow. The one-byte case (counts, codecs,
 * small lengths and ids) is inline: the decode of a catalog segment
 * reads a varint every few bytes, and the call was a tenth of an open. */
uint64_t tf_read_varint_long(tf_cursor *r);
static inline uint64_t tf_read_varint(tf_cursor *r)
{
    if (!r->bad && r->pos < r->len && r->p[r->pos] < 0x80)
        return r->p[r->pos++];
    return tf_read_varint_long(r);
}

#endif
