#include "codec/keyframe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/entropy/rans.h"
#include "codec/keyframe_planes.h"
#include "codec/prog/prog_leaf_codings.h"
#include "codec/sample.h"
#include "common/dtype.h"

/* A plane other than the exponent's is coded where its sample takes at
 * most this many bits a byte: decoding a coded plane costs several times
 * what joining a raw one does, worth it for a sixteenth of its size and
 * more (a constant sign: 7 bits), not for the last percent of a
 * mantissa byte. */
#define KF_CODE_BITS 7.5
/* The exponent plane is coded unless its sample takes more than this
 * many bits a byte (random bytes, which Huffman codes cannot shorten). */
#define KF_EXPONENT_BITS 7.9
/* Elements decoded and joined at a time: their planes stay in cache; a
 * multiple of a turn of HUFF4 streams, which decode fastest whole. */
#define KF_PIECE ((size_t)4096)

enum { PLANE_CONST = 0, PLANE_LITERAL = 1 };

bool tf_keyframe_dtype(unsigned dtype)
{
    return dtype == TF_DT_F16 || dtype == TF_DT_BF16 || dtype == TF_DT_F32;
}

/* Element width, or 0 when the codec does not apply. */
static unsigned width_of(unsigned dtype)
{
    return tf_keyframe_dtype(dtype) ? tf_dtype_get(dtype)->size : 0;
}

/* ---- encoding ---- */

/* Byte counts of each plane in the sample (codec/sample.h) of n >= 1
 * elements, and which planes are worth coding (want[p]): the exponent's
 * unless it looks random, another where its entropy is low enough. */
static int plan_planes(const uint8_t *src, size_t n, unsigned w, uint64_t (*count)[256],
                       bool *want, tf_error *e)
{
    const size_t runs = tf_sample_runs(n), run = tf_sample_run_len(n), m = runs * run;
    uint8_t *sample = malloc(m * w + 1);
    if (!sample)
        return tf_fail(e, ENOMEM, "keyframe: out of memory");
    uint8_t *plane[4];
    for (unsigned p = 0; p < w; p++)
        plane[p] = sample + p * m;
    for (size_t k = 0; k < runs; k++) {
        uint8_t *at[4];
        for (unsigned p = 0; p < w; p++)
            at[p] = plane[p] + k * run;
        tf_keyframe_split(src + tf_sample_run_start(n, k) * w, run, w, at);
    }
    for (unsigned p = 0; p < w; p++) {
        memset(count[p], 0, sizeof count[p]);
        for (size_t i = 0; i < m; i++)
            count[p][plane[p][i]]++;
        const double bits = p ? KF_CODE_BITS : KF_EXPONENT_BITS;
        want[p] = tf_rans_entropy_bits(count[p], 1, 256) <= bits * (double)m;
    }
    free(sample);
    return 0;
}

static int put_const(uint8_t value, tf_buf *out, tf_error *e)
{
    uint8_t c[2] = { PLANE_CONST, value };
    return tf_buf_put(out, c, 2) < 0 ? tf_fail(e, ENOMEM, "keyframe: out of memory") : 0;
}

/* A literal plane: its body's length, then the body, u8 coding first. */
static int put_literal_head(unsigned coding, size_t body, tf_buf *out, tf_error *e)
{
    int rc = tf_buf_u8(out, PLANE_LITERAL) | tf_buf_varint(out, body) |
             tf_buf_u8(out, (uint8_t)coding);
    return rc ? tf_fail(e, ENOMEM, "keyframe: out of memory") : 0;
}

static int put_raw(const uint8_t *plane, size_t n, tf_buf *out, tf_error *e)
{
    return put_literal_head(TF_PROG_CODE_RAW, 1 + n, out, e) < 0 || tf_buf_put(out, plane, n) < 0
               ? tf_fail(e, ENOMEM, "keyframe: out of memory")
               : 0;
}

/* Plane of n >= 1 bytes, worth coding: constant, in Huffman codes or
 * raw, whichever is smallest. The codes are fitted on the plane's
 * sample counts, which the byte values of the plane that the sample
 * missed join with a count below any it saw. */
static int put_coded(const uint8_t *plane, size_t n, const uint64_t *sample, tf_buf *out,
                     tf_error *e)
{
    uint8_t lo, hi;
    tf_keyframe_range(plane, n, &lo, &hi);
    if (lo == hi)
        return put_const(lo, out, e);
    uint64_t count[256] = { 0 };
    for (unsigned v = lo; v <= hi; v++)
        count[v] = 16 * sample[v] + 1;
    uint8_t len[256];
    tf_huff_lengths(count, 256, tf_prog_huff_limit(n), len);
    /* the body after room for its head, which tells its length */
    const size_t start = out->len, head = 1 + 10;
    if (!tf_buf_reserve(out, head + 1))
        return tf_fail(e, ENOMEM, "keyframe: out of memory");
    tf_buf_commit(out, head);
    tf_buf_u8(out, TF_PROG_CODE_HUFF4);
    if (tf_prog_huff_write_lengths(plane, n, 256, len, TF_PROG_CODE_HUFF4, out, e) < 0)
        return -1;
    const size_t body = out->len - start - head;
    out->len = start;
    if (body >= 1 + n) /* codes do not pay */
        return put_raw(plane, n, out, e);
    tf_buf_u8(out, PLANE_LITERAL); /* within the room reserved */
    tf_buf_varint(out, body);
    memmove(out->data + out->len, out->data + start + head, body);
    tf_buf_commit(out, body);
    return 0;
}

static int keyframe_encode(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                           tf_buf *out, tf_error *e)
{
    const unsigned w = width_of(ctx->dtype);
    if (!w)
        return tf_fail(e, EINVAL, "keyframe: needs a F16, BF16 or F32 dtype");
    const size_t n = len / w, whole = n * w;
    bool want[4] = { false };
    uint64_t(*count)[256] = malloc(4 * sizeof *count);
    if (!count)
        return tf_fail(e, ENOMEM, "keyframe: out of memory");
    if (n && plan_planes(src, n, w, count, want, e) < 0) {
        free(count);
        return -1;
    }
    /* Planes go lowest first. Those raw ahead of the first one worth
     * coding are split straight into their place in out: room for all
     * planes raw and for the codes of one at their longest (12 bits a
     * byte), so that out does not move while they are split, nor, as a
     * rule, after. */
    unsigned held = 0; /* planes split into planes[] */
    for (unsigned q = 0; q < w; q++)
        held += held || want[w - 1 - q];
    uint8_t *planes = malloc(held * n + 1);
    if (!planes || !tf_buf_reserve(out, len + n / 2 + 64 * w)) {
        free(planes);
        free(count);
        return tf_fail(e, ENOMEM, "keyframe: out of memory");
    }
    uint8_t *plane[4];
    for (unsigned q = 0; q < w; q++) {
        const unsigned p = w - 1 - q;
        if (q < w - held) {
            put_literal_head(TF_PROG_CODE_RAW, 1 + n, out, NULL); /* reserved */
            plane[p] = out->data + out->len;
            tf_buf_commit(out, n);
        } else {
            plane[p] = planes + p * n;
        }
    }
    tf_keyframe_split(src, n, w, plane);
    int rc = 0;
    for (unsigned q = w - held; q < w && rc == 0; q++) {
        const unsigned p = w - 1 - q;
        rc = want[p] ? put_coded(plane[p], n, count[p], out, e) : put_raw(plane[p], n, out, e);
    }
    free(planes);
    free(count);
    if (rc == 0 && tf_buf_put(out, src + whole, len - whole) < 0)
        rc = tf_fail(e, ENOMEM, "keyframe: out of memory");
    return rc;
}

/* ---- decoding ---- */

typedef struct {
    uint8_t kind;
    uint8_t value;          /* PLANE_CONST */
    const uint8_t *raw;     /* a raw literal's n bytes, read in place */
    bool open;              /* lit is open, to be closed */
    tf_prog_lit_reader lit; /* another literal */
} plane_reader;

static int open_plane(plane_reader *pr, tf_cursor *in, size_t n, unsigned p, tf_error *e)
{
    pr->kind = tf_read_u8(in);
    if (pr->kind == PLANE_CONST) {
        pr->value = tf_read_u8(in);
        return in->bad ? tf_fail(e, EIO, "keyframe: constant plane %u is truncated", p) : 0;
    }
    uint64_t body = tf_read_varint(in);
    if (in->bad || pr->kind != PLANE_LITERAL || body > tf_cursor_left(in))
        return tf_fail(e, EIO, "keyframe: plane %u is missing, truncated or unknown", p);
    const uint8_t *lit = tf_read_bytes(in, (size_t)body);
    if (body == 1 + n && lit[0] == TF_PROG_CODE_RAW) {
        pr->raw = lit + 1;
        return 0;
    }
    pr->open = true;
    return tf_prog_lit_open(&pr->lit, lit, (size_t)body, 8, n, NULL, e);
}

static int decode_planes(plane_reader *pr, size_t n, unsigned w, uint8_t *dst, tf_error *e)
{
    uint8_t *pieces = malloc(KF_PIECE * w);
    if (!pieces)
        return tf_fail(e, ENOMEM, "keyframe: out of memory");
    for (size_t at = 0; at < n; at += KF_PIECE) {
        const size_t count = n - at < KF_PIECE ? n - at : KF_PIECE;
        const uint8_t *bytes[4];
        for (unsigned p = 0; p < w; p++) {
            uint8_t *piece = pieces + p * KF_PIECE;
            if (pr[p].raw)
                piece = NULL;
            else if (pr[p].kind == PLANE_CONST)
                memset(piece, pr[p].value, count);
            else
                tf_prog_lit_read8(&pr[p].lit, piece, count, NULL);
            bytes[p] = piece ? piece : pr[p].raw + at;
        }
        tf_keyframe_join(bytes, count, w, dst + at * w);
    }
    free(pieces);
    for (unsigned p = 0; p < w; p++)
        if (pr[p].open && tf_prog_lit_finish(&pr[p].lit, e) < 0)
            return -1;
    return 0;
}

static int keyframe_decode(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                           uint8_t *dst, size_t len, tf_error *e)
{
    const unsigned w = width_of(ctx->dtype);
    if (!w)
        return tf_fail(e, EIO, "keyframe: blob of %zu bytes has dtype %u", len, ctx->dtype);
    const size_t n = len / w, whole = n * w;
    tf_cursor in = tf_cursor_make(enc, enc_len);
    plane_reader *pr = calloc(w, sizeof *pr);
    int rc = pr ? 0 : tf_fail(e, ENOMEM, "keyframe: out of memory");
    for (unsigned q = 0; q < w && rc == 0; q++) /* lowest plane first */
        rc = open_plane(&pr[w - 1 - q], &in, n, w - 1 - q, e);
    if (rc == 0 && tf_cursor_left(&in) != len - whole)
        rc = tf_fail(e, EIO, "keyframe: %zu bytes after the planes, expected %zu",
                     tf_cursor_left(&in), len - whole);
    if (rc == 0 && len > whole)
        memcpy(dst + whole, tf_read_bytes(&in, len - whole), len - whole);
    if (rc == 0)
        rc = decode_planes(pr, n, w, dst, e);
    for (unsigned p = 0; pr && p < w; p++)
        if (pr[p].open)
            tf_prog_lit_close(&pr[p].lit);
    free(pr);
    return rc;
}

const tf_codec tf_codec_keyframe = {
    .id = TF_CODEC_KEYFRAME,
    .name = "keyframe",
    .encode = keyframe_encode,
    .decode = keyframe_decode,
};
