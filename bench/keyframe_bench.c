/* keyframe_bench: the codec a run's newest checkpoint is stored with
 * (tf_codec_newest_keyframe), next to the self-contained codecs it is
 * measured against, on the same chunks. Prints figures; no thresholds.
 *
 *   keyframe_bench [--rounds N] FILE.safetensors...
 *
 * Per file, its float tensors (F16, BF16, F32) cut in chunks of
 * 2^TF_CHUNK_SHIFT_DEFAULT elements, as an archive cuts them; every
 * tensor counts, a tied copy too. Per codec:
 *   bits/elem   encoded bytes * 8 / elements
 *   vs best     size / the best existing codec's: per chunk the least of
 *               raw, zstd, bytegroup and prog (sampled fit), which the
 *               writer chooses among for a chunk without reference
 *   encode, decode  MB/s (10^6 bytes of chunk data per second of the
 *               thread's CPU time, one thread) over all chunks: median
 *               and range of --rounds rounds (default 5); the rounds
 *               interleave the codecs, so that load from others falls
 *               on all of them alike; every decode is checked byte for
 *               byte
 *   x zstd      encode / zstd -3's encode, decode / zstd -d's (the
 *               decoding of zstd -3's frames), of the medians
 * prog: its sampled fit on each chunk (what the writer does by default)
 * then encoding; a chunk it fits no program for is stored raw.
 *
 * Build: make bench/keyframe_bench. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "codec/bytegroup.h"
#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "common/zstd_frame.h"
#include "common/buf.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/malloc_tune.h"
#include "format/container.h"
#include "format/safetensors.h"

#define MAX_ROUNDS 64

typedef struct {
    const uint8_t *data;
    size_t len;
    unsigned dtype;
} chunk;

/* One codec as the bench runs it: encode appends to out, decode fills
 * exactly len bytes. */
typedef struct {
    const char *name;
    int (*encode)(const chunk *c, tf_buf *out, tf_error *e);
    int (*decode)(const uint8_t *enc, size_t enc_len, const chunk *c, uint8_t *dst,
                  tf_error *e);
} method;

static int zstd1_encode(const chunk *c, tf_buf *out, tf_error *e)
{
    return tf_zstd_compress(c->data, c->len, 1, out, e);
}

static int zstd3_encode(const chunk *c, tf_buf *out, tf_error *e)
{
    return tf_zstd_compress(c->data, c->len, 3, out, e);
}

static int zstd_decode(const uint8_t *enc, size_t enc_len, const chunk *c, uint8_t *dst,
                       tf_error *e)
{
    return tf_zstd_decompress(enc, enc_len, dst, c->len, e);
}

static int codec_encode(unsigned id, const chunk *c, tf_buf *out, tf_error *e)
{
    tf_codec_ctx ctx = { .dtype = c->dtype };
    return tf_codec_get(id)->encode(c->data, c->len, &ctx, out, e);
}

static int codec_decode(unsigned id, const uint8_t *enc, size_t enc_len, const chunk *c,
                        uint8_t *dst, tf_error *e)
{
    tf_codec_ctx ctx = { .dtype = c->dtype };
    return tf_codec_get(id)->decode(enc, enc_len, &ctx, dst, c->len, e);
}

static int bytegroup_encode(const chunk *c, tf_buf *out, tf_error *e)
{
    return codec_encode(TF_CODEC_BYTEGROUP, c, out, e);
}

static int bytegroup_decode(const uint8_t *enc, size_t enc_len, const chunk *c, uint8_t *dst,
                            tf_error *e)
{
    return codec_decode(TF_CODEC_BYTEGROUP, enc, enc_len, c, dst, e);
}

static int keyframe_encode(const chunk *c, tf_buf *out, tf_error *e)
{
    return codec_encode(tf_codec_newest_keyframe((uint8_t)c->dtype), c, out, e);
}

static int keyframe_decode(const uint8_t *enc, size_t enc_len, const chunk *c, uint8_t *dst,
                           tf_error *e)
{
    return codec_decode(tf_codec_newest_keyframe((uint8_t)c->dtype), enc, enc_len, c, dst, e);
}

/* prog as the writer runs it by default; a chunk without a program is
 * stored raw (an empty encoding here). */
static int prog_encode(const chunk *c, tf_buf *out, tf_error *e)
{
    const tf_prog_fit_opts opts = { .sampled = true };
    tf_buf model = { 0 };
    int rc = 0;
    if (tf_prog_fit(c->data, c->len, c->dtype, &opts, &model, NULL) == 0) {
        tf_codec_ctx ctx = { .dtype = c->dtype, .model = model.data, .model_len = model.len };
        rc = tf_codec_prog.encode(c->data, c->len, &ctx, out, e);
    }
    tf_buf_free(&model);
    return rc;
}

static int prog_decode(const uint8_t *enc, size_t enc_len, const chunk *c, uint8_t *dst,
                       tf_error *e)
{
    if (enc_len == 0) {
        memcpy(dst, c->data, c->len);
        return 0;
    }
    return codec_decode(TF_CODEC_PROG, enc, enc_len, c, dst, e);
}

static size_t stored_size(const method *m, const tf_buf *enc, const chunk *c)
{
    return m->decode == prog_decode && enc->len == 0 ? c->len : enc->len;
}

enum { ZSTD3, BYTEGROUP, PROG, KEYFRAME, N_METHODS = 5 };
static const method methods[N_METHODS] = {
    [ZSTD3] = { "zstd -3", zstd3_encode, zstd_decode },
    [BYTEGROUP] = { "bytegroup", bytegroup_encode, bytegroup_decode },
    [PROG] = { "prog", prog_encode, prog_decode },
    [KEYFRAME] = { "keyframe", keyframe_encode, keyframe_decode },
    [4] = { "zstd -1", zstd1_encode, zstd_decode },
};

static bool measured_dtype(unsigned dtype)
{
    return dtype == TF_DT_F16 || dtype == TF_DT_BF16 || dtype == TF_DT_F32;
}

/* The file's float tensors in chunks; *n of them, *elems elements. */
static chunk *cut_chunks(const uint8_t *file, const tf_st_header *h, size_t *n, size_t *elems)
{
    size_t cap = 0;
    *n = *elems = 0;
    chunk *c = NULL;
    for (size_t i = 0; i < h->ntensors; i++) {
        const tf_st_tensor *t = &h->tensors[i];
        if (!measured_dtype(t->dtype))
            continue;
        const size_t w = tf_dtype_get(t->dtype)->size, step = w << TF_CHUNK_SHIFT_DEFAULT;
        const size_t len = (size_t)(t->end - t->begin);
        const uint8_t *data = file + tf_st_data_offset(h, t);
        *elems += len / w;
        for (size_t at = 0; at < len; at += step) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                chunk *grown = realloc(c, cap * sizeof *c);
                if (!grown) {
                    free(c);
                    return NULL;
                }
                c = grown;
            }
            c[(*n)++] = (chunk){ data + at, len - at < step ? len - at : step, t->dtype };
        }
    }
    return c ? c : malloc(1);
}

typedef struct {
    tf_buf *enc; /* per chunk */
    size_t bytes;
    double enc_s[MAX_ROUNDS], dec_s[MAX_ROUNDS];
} result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, least and greatest of MB/s over the rounds' seconds. */
static void speeds(const double *s, int rounds, size_t raw, double *med, double *lo, double *hi)
{
    double mbs[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        mbs[r] = (double)raw / s[r] / 1e6;
    qsort(mbs, (size_t)rounds, sizeof *mbs, cmp_double);
    *lo = mbs[0];
    *hi = mbs[rounds - 1];
    *med = rounds % 2 ? mbs[rounds / 2] : (mbs[rounds / 2 - 1] + mbs[rounds / 2]) / 2;
}

/* Round r of method m: every chunk encoded, then decoded and checked. */
static int run_round(const method *m, const chunk *c, size_t n, result *res, int r,
                     uint8_t *scratch)
{
    tf_error e = { 0 };
    double start = bench_thread_seconds();
    for (size_t i = 0; i < n; i++) {
        res->enc[i].len = 0;
        if (m->encode(&c[i], &res->enc[i], &e) < 0) {
            fprintf(stderr, "%s: encode: %s\n", m->name, e.msg);
            return -1;
        }
    }
    double encoded = bench_thread_seconds();
    for (size_t i = 0; i < n; i++)
        if (m->decode(res->enc[i].data, res->enc[i].len, &c[i], scratch, &e) < 0 ||
            memcmp(scratch, c[i].data, c[i].len) != 0) {
            fprintf(stderr, "%s: chunk %zu does not decode to its bytes: %s\n", m->name, i,
                    e.msg);
            return -1;
        }
    if (r >= 0) { /* round -1 warms the buffers up: its page faults do not count */
        res->enc_s[r] = encoded - start;
        res->dec_s[r] = bench_thread_seconds() - encoded;
    }
    return 0;
}

static void print_row(const char *name, size_t bytes, size_t best, size_t elems, size_t raw,
                      const result *res, const result *zstd3, int rounds)
{
    printf("  %-10s %8.3f %8.4f", name, 8.0 * (double)bytes / (double)elems,
           (double)bytes / (double)best);
    if (!res) {
        printf("\n");
        return;
    }
    double em, el, eh, dm, dl, dh, zem, zel, zeh, zdm, zdl, zdh;
    speeds(res->enc_s, rounds, raw, &em, &el, &eh);
    speeds(res->dec_s, rounds, raw, &dm, &dl, &dh);
    speeds(zstd3->enc_s, rounds, raw, &zem, &zel, &zeh);
    speeds(zstd3->dec_s, rounds, raw, &zdm, &zdl, &zdh);
    printf("  %6.0f (%4.0f-%4.0f)  %6.0f (%4.0f-%4.0f)  %5.2f  %5.2f\n", em, el, eh, dm, dl, dh,
           em / zem, dm / zdm);
}

static int bench_file(const char *path, int rounds)
{
    size_t file_len, n, elems, raw = 0, largest = 0;
    tf_st_header h;
    uint8_t *file = bench_read_safetensors(path, &file_len, &h);
    if (!file)
        return -1;
    chunk *c = cut_chunks(file, &h, &n, &elems);
    result res[N_METHODS] = { 0 };
    uint8_t *scratch = NULL;
    int rc = c ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        raw += c[i].len;
        largest = c[i].len > largest ? c[i].len : largest;
    }
    scratch = malloc(largest + 1);
    for (int m = 0; rc == 0 && m < N_METHODS; m++)
        rc = (res[m].enc = calloc(n + 1, sizeof(tf_buf))) && scratch ? 0 : -1;
    for (int r = -1; rc == 0 && r < rounds; r++)
        for (int m = 0; rc == 0 && m < N_METHODS; m++)
            rc = run_round(&methods[m], c, n, &res[m], r, scratch);
    size_t best = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t least = c[i].len;
        for (int m = 0; m < N_METHODS; m++) {
            size_t size = stored_size(&methods[m], &res[m].enc[i], &c[i]);
            res[m].bytes += size;
            if (m == ZSTD3 || m == BYTEGROUP || m == PROG)
                least = size < least ? size : least;
        }
        best += least;
    }
    if (rc == 0) {
        printf("%s: %zu chunks, %zu elements, %zu bytes; %d rounds\n", path, n, elems, raw,
               rounds);
        printf("  %-10s %8s %8s  %-18s  %-18s  %5s  %5s\n", "codec", "bits/el", "vs best",
               "encode MB/s", "decode MB/s", "x z-3", "x z-d");
        for (int m = 0; m < N_METHODS; m++)
            print_row(methods[m].name, res[m].bytes, best, elems, raw, &res[m], &res[ZSTD3],
                      rounds);
        print_row("best", best, best, elems, raw, NULL, NULL, rounds);
    }
    for (int m = 0; m < N_METHODS; m++) {
        for (size_t i = 0; res[m].enc && i < n; i++)
            tf_buf_free(&res[m].enc[i]);
        free(res[m].enc);
    }
    free(scratch);
    free(c);
    tf_st_free(&h);
    free(file);
    return rc;
}

int main(int argc, char **argv)
{
    tf_malloc_reuse();
    int rounds = 5, rc = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0 &&
            atoi(argv[i + 1]) <= MAX_ROUNDS) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: keyframe_bench [--rounds N] FILE.safetensors...\n");
            return 2;
        }
    }
    for (; i < argc; i++)
        rc |= bench_file(argv[i], rounds) < 0;
    return rc;
}
