#include "codec/prog/prog_ops.h"

#include <string.h>

#include "common/buf.h"

/* Runs stmt for i in [0, n): in groups of 8, which GCC vectorizes at -O2
 * (its cheap cost model wants a known trip count), then the rest. */
#define EACH_WORD(n, stmt)                              \
    do {                                                \
        size_t i = 0;                                   \
        while (i + 8 <= (n))                            \
            for (unsigned group_ = 0; group_ < 8; group_++, i++) \
                stmt;                                   \
        for (; i < (n); i++)                            \
            stmt;                                       \
    } while (0)

void tf_prog_map_apply(unsigned kind, uint64_t param, unsigned width, uint64_t *v, size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    switch (kind) {
    case TF_PROG_MAP_XOR: EACH_WORD(n, v[i] ^= param); break;
    case TF_PROG_MAP_ADD: EACH_WORD(n, v[i] = (v[i] + param) & mask); break;
    case TF_PROG_MAP_ZIGZAG:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_prog_zigzag_decode(v[i], width);
        break;
    case TF_PROG_MAP_GRAY:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_prog_gray_decode(v[i]);
        break;
    case TF_PROG_MAP_BITREV:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_prog_bitrev(v[i], width);
        break;
    case TF_PROG_MAP_ROTL: EACH_WORD(n, v[i] = tf_prog_rotl(v[i], (unsigned)param, width)); break;
    }
}

void tf_prog_map_invert(unsigned kind, uint64_t param, unsigned width, const uint64_t *src,
                        uint64_t *dst, size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    switch (kind) {
    case TF_PROG_MAP_XOR:
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] ^ param;
        break;
    case TF_PROG_MAP_ADD:
        for (size_t i = 0; i < n; i++)
            dst[i] = (src[i] - param) & mask;
        break;
    case TF_PROG_MAP_ZIGZAG:
        for (size_t i = 0; i < n; i++)
            dst[i] = tf_prog_zigzag_encode(src[i], width);
        break;
    case TF_PROG_MAP_GRAY:
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] ^ (src[i] >> 1);
        break;
    case TF_PROG_MAP_BITREV:
        for (size_t i = 0; i < n; i++)
            dst[i] = tf_prog_bitrev(src[i], width);
        break;
    case TF_PROG_MAP_ROTL:
        for (size_t i = 0; i < n; i++)
            dst[i] = tf_prog_rotl(src[i], width - (unsigned)param, width);
        break;
    }
}

void tf_prog_scan_apply(unsigned kind, unsigned width, uint64_t *carry, const uint64_t *upd,
                        uint64_t *out, size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    uint64_t prev = *carry;
    if (kind == TF_PROG_SCAN_XOR) {
        for (size_t i = 0; i < n; i++)
            out[i] = prev ^= upd[i];
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = prev = (prev + upd[i]) & mask;
    }
    *carry = prev;
}

void tf_prog_scan_invert(unsigned kind, unsigned width, const uint64_t *x, uint64_t *upd,
                         size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    for (size_t i = 1; i < n; i++)
        upd[i - 1] = kind == TF_PROG_SCAN_XOR ? x[i] ^ x[i - 1] : (x[i] - x[i - 1]) & mask;
}

void tf_prog_scan_lag_apply(unsigned kind, unsigned width, uint64_t *ring, uint64_t m,
                            uint64_t *at, const uint64_t *upd, uint64_t *out, size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    const bool xor = tf_prog_scan_xor(kind);
    while (n) {
        /* up to the ring's end: no wrap inside the loops */
        size_t seg = m - *at < n ? (size_t)(m - *at) : n;
        uint64_t *r = ring + *at;
        if (xor)
            EACH_WORD(seg, out[i] = r[i] ^= upd[i]);
        else
            EACH_WORD(seg, out[i] = r[i] = (r[i] + upd[i]) & mask);
        *at = *at + seg == m ? 0 : *at + seg;
        upd += seg;
        out += seg;
        n -= seg;
    }
}

void tf_prog_scan_lag_invert(unsigned kind, unsigned width, uint64_t m, const uint64_t *x,
                             uint64_t *upd, size_t n)
{
    const uint64_t mask = tf_prog_mask(width);
    size_t head = m < n ? (size_t)m : n;
    memcpy(upd, x, head * sizeof *x);
    if (tf_prog_scan_xor(kind))
        for (size_t i = head; i < n; i++)
            upd[i] = x[i] ^ x[i - head];
    else
        for (size_t i = head; i < n; i++)
            upd[i] = (x[i] - x[i - head]) & mask;
}

void tf_prog_merge_field(const uint64_t *restrict field, unsigned shift, uint64_t *restrict out,
                         size_t n)
{
    EACH_WORD(n, out[i] |= field[i] << shift);
}

void tf_prog_split_field(const uint64_t *x, unsigned shift, unsigned bits, uint64_t *field,
                         size_t n)
{
    const uint64_t mask = tf_prog_mask(bits);
    for (size_t i = 0; i < n; i++)
        field[i] = x[i] >> shift & mask;
}

void tf_prog_words_load(const uint8_t *src, size_t n, unsigned bytes, uint64_t *v)
{
    switch (bytes) {
    case 1:
        for (size_t i = 0; i < n; i++)
            v[i] = src[i];
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_le16_get(src + 2 * i);
        break;
    case 4:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_le32_get(src + 4 * i);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            v[i] = tf_le64_get(src + 8 * i);
    }
}

void tf_prog_words_store(const uint64_t *v, size_t n, unsigned bytes, uint8_t *dst)
{
    switch (bytes) {
    case 1:
        for (size_t i = 0; i < n; i++)
            dst[i] = (uint8_t)v[i];
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            tf_le16_put(dst + 2 * i, (uint16_t)v[i]);
        break;
    case 4:
        for (size_t i = 0; i < n; i++)
            tf_le32_put(dst + 4 * i, (uint32_t)v[i]);
        break;
    case 8:
        for (size_t i = 0; i < n; i++)
            tf_le64_put(dst + 8 * i, v[i]);
        break;
    default: /* no dtype's, but a program's root may be any whole bytes */
        for (size_t i = 0; i < n; i++)
            for (unsigned k = 0; k < bytes; k++)
                dst[bytes * i + k] = (uint8_t)(v[i] >> (8 * k));
    }
}
