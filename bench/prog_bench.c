/* prog_bench: the prog codec on real safetensors files, side by side with
 * the bounds and baselines it is measured against. Prints figures; no
 * thresholds.
 *
 * Per file (tensor data only; the JSON header is left out of every
 * figure but the zstd -d timing, which decompresses the whole file). A
 * tensor equal to an earlier one (a tied weight) is stored once by an
 * archive: it is counted once, in every figure but the file's.
 *   entropy       per distinct tensor, summed: the order-0 entropy of each
 *                 of its byte planes (a plane: byte k of every element),
 *                 n * H(plane) / 8 -- the bytes the codec codes, and what
 *                 each figure below is divided by; and (for reference)
 *                 the same over the whole file's planes
 *   searched      what `trajpack --search` stores: a program searched per
 *                 tensor (prior learned from this file), its chunks (2^20
 *                 elements each), models counted once
 *   sampled       what trajpack stores by default: each chunk's program
 *                 chosen from its sample (codec/prog/prog_fields.h), a
 *                 search only where the sample shows structure
 *   bytegroup+huffman  the fast baseline of the ZipNN method, a coder of
 *                 this bench: per chunk, each byte plane in one canonical
 *                 Huffman code (12 bits at most; raw where that is no
 *                 smaller), with its table
 *   independent elements  per tensor, the order-0 entropy of the
 *                 elements' top 16 bits taken whole plus that of each
 *                 lower byte plane: the least that coding each element on
 *                 its own can cost, even with the tensor's exact
 *                 frequencies known for free, where the lower bytes are
 *                 independent of the top ones (a float's low mantissa);
 *                 only dependence between elements goes below it
 *   bytegroup-19  the byte planes of the file, each one zstd frame at
 *                 level 19 (zstd library)
 *   decode        prog decoding every chunk (searched, then sampled)
 *                 into one buffer of the tensors' bytes, single-threaded,
 *                 against
 *                 ZSTD_decompress of one level-19 frame of the whole file
 *                 into one buffer; the thread's CPU time of the pass (of
 *                 the call), checked byte for byte after it, best of
 *                 --rounds (default 3) and of at least 0.25 s of passes,
 *                 MB = 10^6 bytes
 *   time          CPU time of learning the prior, of the searches (fit)
 *                 and of encoding the chunks with the models found; of
 *                 the sampled fits and encodes; of the baseline's coding:
 *                 MB/s of the tensors' bytes, with the malloc setting of
 *                 the programs that encode
 *
 * Usage: prog_bench [--budget N] [--no-prior] [--rounds N] FILE.safetensors...
 * Real data: the corpus's first checkpoint
 * (corpus-data/default/step-000025.safetensors) and the float32 weights of
 * shared/corpus/extract_real_weights.py. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "bench_util.h"
#include "codec/entropy/huffman.h"
#include "codec/entropy/rans.h"
#include "codec/prog/prog.h"
#include "common/buf.h"
#include "common/hash.h"
#include "common/malloc_tune.h"
#include "common/dtype.h"
#include "format/safetensors.h"

#define CHUNK_ELEMS ((size_t)1 << 20)
/* Decode timings: the best of this many rounds (--rounds), and of as many
 * more as fill MIN_TIMED seconds: a small file's pass takes a fraction of
 * a millisecond, which a burst of another tenant's work on a shared
 * machine can cover for all of a few rounds. */
static int decode_rounds = 3;
#define MIN_TIMED 0.25

/* Whether round r (of `timed` seconds so far) is still to run. */
static bool more_rounds(int r, double timed)
{
    return r < decode_rounds || timed < MIN_TIMED;
}
#define MAX_PROGRAMS 64

typedef struct {
    const uint8_t *data;
    size_t len;
    unsigned dtype;
    bool copy; /* equal to an earlier tensor: stored once */
    tf_buf model;
    tf_buf *chunks;
    size_t n_chunks;
    tf_buf *sampled; /* the sampled encoder's chunks (n_chunks); empty for a
                        copy, and where no program paid (stored raw) */
} tensor;

typedef struct {
    char text[160];
    size_t count, bytes;
} program_count;

static unsigned elem_size(unsigned dtype)
{
    return tf_dtype_get(dtype)->size;
}

/* Bytes of plane k (of elements of size w) over all tensors of that size. */
static uint8_t *gather_plane(const tensor *t, size_t nt, unsigned w, unsigned k, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < nt; i++)
        *n += elem_size(t[i].dtype) == w ? t[i].len / w : 0;
    uint8_t *plane = malloc(*n ? *n : 1);
    if (!plane)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < nt; i++) {
        if (elem_size(t[i].dtype) != w)
            continue;
        for (size_t j = k; j < t[i].len; j += w)
            plane[at++] = t[i].data[j];
    }
    return plane;
}

static double order0_bytes(const uint8_t *p, size_t n)
{
    uint64_t hist[256] = { 0 };
    for (size_t i = 0; i < n; i++)
        hist[p[i]]++;
    return tf_rans_entropy_bits(hist, 1, 256) / 8;
}

static size_t zstd19(const uint8_t *p, size_t n, void **frame)
{
    size_t cap = ZSTD_compressBound(n);
    *frame = malloc(cap);
    size_t got = *frame ? ZSTD_compress(*frame, cap, p, n, 19) : 0;
    return ZSTD_isError(got) ? 0 : got;
}

/* Plane entropy and byte-grouped zstd -19 over the whole file. */
static void plane_baselines(const tensor *t, size_t nt, double *entropy, size_t *grouped)
{
    *entropy = 0;
    *grouped = 0;
    for (unsigned w = 1; w <= 8; w *= 2)
        for (unsigned k = 0; k < w; k++) {
            size_t n;
            uint8_t *plane = gather_plane(t, nt, w, k, &n);
            if (!plane || n == 0) {
                free(plane);
                continue;
            }
            void *frame;
            *entropy += order0_bytes(plane, n);
            *grouped += zstd19(plane, n, &frame);
            free(frame);
            free(plane);
        }
}

/* Per distinct tensor, summed: the order-0 entropy of each byte plane (*planes);
 * and (*bound) that of the elements' top 16 bits taken whole (all of a 1-
 * or 2-byte element) plus each lower byte plane's. The bound is what
 * coding each element on its own costs at the tensor's exact frequencies,
 * no model stored, when the lower bytes are independent of the top ones
 * (as a float's low mantissa is of its sign and exponent). */
static void tensor_entropies(const tensor *t, size_t nt, double *planes, double *bound)
{
    *planes = *bound = 0;
    uint64_t *hist = malloc(65536 * sizeof *hist);
    for (size_t i = 0; hist && i < nt; i++) {
        if (t[i].copy)
            continue;
        const unsigned w = elem_size(t[i].dtype), top = w >= 2 ? w - 2 : 0;
        const size_t n = t[i].len / w;
        uint8_t *plane = malloc(n ? n : 1);
        for (unsigned k = 0; plane && k < w; k++) {
            for (size_t j = 0; j < n; j++)
                plane[j] = t[i].data[j * w + k];
            double bytes = order0_bytes(plane, n);
            *planes += bytes;
            *bound += k < top ? bytes : 0;
        }
        free(plane);
        memset(hist, 0, 65536 * sizeof *hist);
        for (size_t j = 0; j < n; j++) {
            const uint8_t *e = t[i].data + j * w + top;
            hist[w >= 2 ? tf_le16_get(e) : e[0]]++;
        }
        *bound += tf_rans_entropy_bits(hist, 1, w >= 2 ? 65536 : 256) / 8;
    }
    free(hist);
}

static void count_program(program_count *pc, size_t *n_pc, const char *text, size_t bytes)
{
    for (size_t i = 0; i < *n_pc; i++)
        if (strcmp(pc[i].text, text) == 0) {
            pc[i].count++;
            pc[i].bytes += bytes;
            return;
        }
    if (*n_pc < MAX_PROGRAMS) {
        snprintf(pc[*n_pc].text, sizeof pc[*n_pc].text, "%s", text);
        pc[*n_pc].count = 1;
        pc[(*n_pc)++].bytes = bytes;
    }
}

/* Whether an earlier tensor has the same model (stored once). */
static bool model_seen(const tensor *t, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (t[k].model.len == t[i].model.len &&
            memcmp(t[k].model.data, t[i].model.data, t[i].model.len) == 0)
            return true;
    return false;
}

/* Fits the tensor's model (the search) and encodes its chunks with it;
 * adds the seconds each took to *fit_s and *encode_s. */
static int encode_tensor(tensor *all, size_t i, const tf_prog_fit_opts *opts, size_t *bytes,
                         double *fit_s, double *encode_s, tf_error *e)
{
    tensor *t = &all[i];
    double start = bench_thread_seconds();
    if (tf_prog_fit(t->data, t->len, t->dtype, opts, &t->model, e) < 0)
        return -1;
    double fitted = bench_thread_seconds();
    *fit_s += fitted - start;
    size_t chunk = CHUNK_ELEMS * elem_size(t->dtype);
    t->n_chunks = t->len ? (t->len + chunk - 1) / chunk : 1;
    t->chunks = calloc(t->n_chunks, sizeof *t->chunks);
    if (!t->chunks)
        return tf_fail(e, ENOMEM, "out of memory");
    *bytes += model_seen(all, i) || t->copy ? 0 : t->model.len;
    tf_codec_ctx ctx = { .dtype = t->dtype, .model = t->model.data, .model_len = t->model.len };
    for (size_t c = 0; c < t->n_chunks; c++) {
        size_t at = c * chunk, len = t->len - at < chunk ? t->len - at : chunk;
        if (tf_codec_prog.encode(t->data + at, len, &ctx, &t->chunks[c], e) < 0)
            return -1;
        *bytes += t->copy ? 0 : t->chunks[c].len;
    }
    *encode_s += bench_thread_seconds() - fitted;
    return 0;
}

/* The default of trajpack: every chunk, its program chosen from its
 * sample, into t->sampled; the bytes of the distinct tensors' (a chunk
 * no program pays for counted raw), and the seconds fit and encode
 * took. */
static int encode_sampled(tensor *t, size_t nt, size_t *bytes, double *seconds, tf_error *e)
{
    const tf_prog_fit_opts opts = { .sampled = true };
    tf_buf model = { 0 };
    *bytes = 0;
    *seconds = 0;
    for (size_t i = 0; i < nt; i++) {
        size_t chunk = CHUNK_ELEMS * elem_size(t[i].dtype);
        t[i].sampled = calloc(t[i].n_chunks, sizeof *t[i].sampled);
        if (!t[i].sampled)
            return tf_fail(e, ENOMEM, "out of memory");
        for (size_t c = 0; c < t[i].n_chunks; c++) {
            size_t at = c * chunk, len = t[i].len - at < chunk ? t[i].len - at : chunk;
            double start = bench_thread_seconds();
            model.len = 0;
            if (tf_prog_fit(t[i].data + at, len, t[i].dtype, &opts, &model, NULL) == 0) {
                tf_codec_ctx ctx = { .dtype = t[i].dtype, .model = model.data,
                                     .model_len = model.len };
                if (tf_codec_prog.encode(t[i].data + at, len, &ctx, &t[i].sampled[c], e) < 0)
                    return -1;
            }
            *seconds += bench_thread_seconds() - start;
            *bytes += t[i].copy ? 0 : t[i].sampled[c].len ? t[i].sampled[c].len : len;
        }
    }
    tf_buf_free(&model);
    return 0;
}

/* The ZipNN method, coded here: the n elements of w bytes at p regrouped
 * into byte planes, each plane in one canonical Huffman code (its table,
 * then the codes) or raw where that is no smaller; out gets the bytes. */
static void bytegroup_huffman(const uint8_t *p, size_t n, unsigned w, tf_buf *out)
{
    uint8_t *plane = malloc(n ? n : 1);
    for (unsigned k = 0; plane && k < w; k++) {
        uint64_t count[256] = { 0 };
        for (size_t i = 0; i < n; i++)
            count[plane[i] = p[i * w + k]]++;
        uint8_t len[256];
        tf_huff_lengths(count, 256, TF_HUFF_MAX_LEN, len);
        size_t table = tf_huff_table_size(len, 256);
        uint64_t bits = tf_huff_cost_bits(count, len, 256);
        if (table + (bits + 7) / 8 >= n) {
            tf_buf_u8(out, 0);
            tf_buf_put(out, plane, n);
            continue;
        }
        tf_buf_u8(out, 1);
        tf_huff_table_write(len, 256, out, NULL);
        tf_huff_encoder enc;
        tf_huff_encoder_init(&enc, len, 256);
        uint8_t *dst = tf_buf_reserve(out, (size_t)(bits + 7) / 8 + 8);
        if (!dst)
            break;
        uint64_t acc = 0;
        unsigned fill = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            acc |= (uint64_t)enc.code[plane[i]] << fill;
            fill += enc.len[plane[i]];
            if (fill >= 32) {
                tf_le32_put(dst + at, (uint32_t)acc);
                at += 4;
                acc >>= 32;
                fill -= 32;
            }
        }
        tf_le64_put(dst + at, acc);
        tf_buf_commit(out, at + (fill + 7) / 8);
    }
    free(plane);
}

/* The baseline's bytes over the distinct tensors, by chunks of 2^20
 * elements, and the seconds it took. */
static size_t baseline_bytes(const tensor *t, size_t nt, double *seconds)
{
    tf_buf out = { 0 };
    size_t bytes = 0;
    double start = bench_thread_seconds();
    for (size_t i = 0; i < nt; i++) {
        unsigned w = elem_size(t[i].dtype);
        size_t chunk = CHUNK_ELEMS * w;
        for (size_t at = 0; !t[i].copy && at < t[i].len; at += chunk) {
            size_t len = t[i].len - at < chunk ? t[i].len - at : chunk;
            out.len = 0;
            bytegroup_huffman(t[i].data + at, len / w, w, &out);
            bytes += out.len;
        }
    }
    *seconds = bench_thread_seconds() - start;
    tf_buf_free(&out);
    return bytes;
}

/* Marks each tensor equal to an earlier one. */
static size_t mark_copies(tensor *t, size_t nt)
{
    size_t copies = 0;
    tf_blob_id *ids = malloc((nt ? nt : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < nt; i++) {
        ids[i] = tf_blob_id_of(t[i].data, t[i].len);
        for (size_t k = 0; k < i && !t[i].copy; k++)
            t[i].copy = t[k].dtype == t[i].dtype && tf_blob_id_eq(&ids[k], &ids[i]);
        copies += t[i].copy;
    }
    free(ids);
    return copies;
}

/* Whether out holds every tensor's bytes, in order. */
static bool decoded_exactly(const tensor *t, size_t nt, const uint8_t *out)
{
    for (size_t i = 0; i < nt; i++, out += t[i - 1].len)
        if (t[i].len && memcmp(out, t[i].data, t[i].len) != 0)
            return false;
    return true;
}

/* Decodes every chunk once into out (the tensors' bytes, in order) and
 * returns the seconds it took: one clock reading before and one after,
 * as for zstd's one call (a reading per chunk costs as much as decoding
 * a small tensor). The searched chunks, or the sampled ones (a chunk
 * stored raw copied). *ok: every call succeeded. */
static double decode_all(const tensor *t, size_t nt, bool sampled, uint8_t *out, bool *ok)
{
    *ok = true;
    double start = bench_thread_seconds();
    for (size_t i = 0; i < nt; i++) {
        size_t chunk = CHUNK_ELEMS * elem_size(t[i].dtype);
        tf_codec_ctx ctx = { .dtype = t[i].dtype };
        for (size_t c = 0; c < t[i].n_chunks; c++) {
            size_t at = c * chunk, len = t[i].len - at < chunk ? t[i].len - at : chunk;
            const tf_buf *enc = sampled ? &t[i].sampled[c] : &t[i].chunks[c];
            tf_error e;
            if (sampled && !enc->len) {
                memcpy(out + at, t[i].data + at, len);
            } else {
                *ok &= tf_codec_prog.decode(enc->data, enc->len, &ctx, out + at, len, &e) == 0;
            }
        }
        out += t[i].len;
    }
    return bench_thread_seconds() - start;
}

/* The best time of decode_all over the rounds, each checked. */
static double best_decode(const tensor *t, size_t nt, bool sampled, uint8_t *decoded, size_t raw,
                          bool *exact)
{
    double best = INFINITY, timed = 0;
    for (int r = 0; *exact && more_rounds(r, timed); r++) {
        bool ok;
        double s = decode_all(t, nt, sampled, decoded, &ok);
        *exact &= ok && decoded_exactly(t, nt, decoded);
        memset(decoded, 0, raw);
        best = s < best ? s : best;
        timed += s;
    }
    return best;
}

static double zstd_decode_seconds(const uint8_t *file, size_t len, size_t *frame_len)
{
    void *frame;
    *frame_len = zstd19(file, len, &frame);
    uint8_t *out = malloc(len ? len : 1);
    double best = INFINITY, timed = 0;
    for (int r = 0; more_rounds(r, timed) && out && *frame_len; r++) {
        double start = bench_thread_seconds();
        size_t got = ZSTD_decompress(out, len, frame, *frame_len);
        double s = bench_thread_seconds() - start;
        if (ZSTD_isError(got) || got != len)
            break;
        best = s < best ? s : best;
        timed += s;
    }
    free(out);
    free(frame);
    return best;
}

static int bench_file(const char *path, unsigned budget, bool learn_prior)
{
    size_t file_len;
    tf_st_header h;
    tf_error e = { 0 };
    uint8_t *file = bench_read_safetensors(path, &file_len, &h);
    if (!file)
        return -1;
    size_t nt = h.ntensors, raw = 0, prog = 0;
    tensor *t = calloc(nt ? nt : 1, sizeof *t);
    tf_prog_tensor *sample = calloc(nt ? nt : 1, sizeof *sample);
    for (size_t i = 0; i < nt; i++) {
        const tf_st_tensor *s = &h.tensors[i];
        t[i] = (tensor){ .data = file + tf_st_data_offset(&h, s), .len = (size_t)(s->end - s->begin),
                         .dtype = s->dtype };
        sample[i] = (tf_prog_tensor){ t[i].data, t[i].len, t[i].dtype };
        raw += t[i].len;
    }
    size_t copies = mark_copies(t, nt), distinct = 0;
    for (size_t i = 0; i < nt; i++)
        distinct += t[i].copy ? 0 : t[i].len;
    double t0 = bench_thread_seconds();
    tf_prog_prior *prior = NULL;
    if (learn_prior && tf_prog_prior_learn(sample, nt, &prior, &e) < 0)
        fprintf(stderr, "%s: prior: %s\n", path, e.msg);
    double t1 = bench_thread_seconds();
    tf_prog_fit_opts opts = { .budget = budget, .prior = prior };
    program_count pc[MAX_PROGRAMS];
    size_t n_pc = 0, largest = 0;
    double fit_s = 0, encode_s = 0;
    for (size_t i = 0; i < nt; i++) {
        size_t before = prog;
        if (encode_tensor(t, i, &opts, &prog, &fit_s, &encode_s, &e) < 0) {
            fprintf(stderr, "%s: tensor %s: %s\n", path, h.tensors[i].name, e.msg);
            return -1;
        }
        char text[160];
        tf_prog_describe(t[i].model.data, t[i].model.len, text, sizeof text);
        count_program(pc, &n_pc, text, prog - before);
        largest = t[i].len > largest ? t[i].len : largest;
    }
    double t2 = bench_thread_seconds();
    uint8_t *decoded = malloc(raw ? raw : 1);
    bool exact = decoded != NULL;
    double decode = best_decode(t, nt, false, decoded, raw, &exact);
    double entropy, per_tensor, bound;
    tensor_entropies(t, nt, &per_tensor, &bound);
    size_t grouped, frame_len;
    plane_baselines(t, nt, &entropy, &grouped);
    double zstd_s = zstd_decode_seconds(file, file_len, &frame_len);
    double prog_mbs = (double)raw / decode / 1e6, zstd_mbs = (double)file_len / zstd_s / 1e6;
    size_t sampled = 0;
    double sampled_s = 0, baseline_s = 0, sampled_decode = INFINITY;
    if (encode_sampled(t, nt, &sampled, &sampled_s, &e) < 0) {
        fprintf(stderr, "%s: sampled: %s\n", path, e.msg);
        exact = false;
    }
    if (exact)
        sampled_decode = best_decode(t, nt, true, decoded, raw, &exact);
    size_t baseline = baseline_bytes(t, nt, &baseline_s);

    printf("%s: %zu tensors (%zu equal to an earlier one), %zu tensor bytes, %zu distinct "
           "(budget %u, prior %s)\n", path, nt, copies, raw, distinct,
           opts.budget ? opts.budget : prior ? TF_PROG_DEFAULT_BUDGET : TF_PROG_UNIFORM_BUDGET,
           prior ? "learned" : "uniform");
    printf("  entropy               %12.0f  byte planes per distinct tensor (whole file's "
           "planes: %.0f)\n", per_tensor, entropy);
    printf("  searched              %12zu  %.4f of entropy%s\n", prog,
           (double)prog / per_tensor, exact ? "" : "  NOT EXACT");
    printf("  sampled               %12zu  %.4f of entropy\n", sampled,
           (double)sampled / per_tensor);
    printf("  bytegroup+huffman     %12zu  %.4f of entropy: searched %.4f of it, sampled %.4f\n",
           baseline, (double)baseline / per_tensor, (double)prog / (double)baseline,
           (double)sampled / (double)baseline);
    printf("  independent elements  %12.0f  %.4f of entropy\n", bound, bound / per_tensor);
    printf("  bytegroup zstd -19    %12zu  %.4f of entropy\n", grouped,
           (double)grouped / per_tensor);
    printf("  zstd -19 (file)       %12zu\n", frame_len);
    printf("  decode  searched %.0f MB/s, zstd -d %.0f MB/s: %.2fx; sampled %.0f MB/s: %.2fx\n",
           prog_mbs, zstd_mbs, prog_mbs / zstd_mbs, (double)raw / sampled_decode / 1e6,
           (double)raw / sampled_decode / 1e6 / zstd_mbs);
    printf("  time    searched: prior %.1f s, fit %.1f s, encode %.1f s (in all %.1f s, %.0f MB/s)"
           "\n", t1 - t0, fit_s, encode_s, t2 - t1 + (t1 - t0),
           (double)distinct / (t2 - t0) / 1e6);
    printf("          sampled %.3f s (%.0f MB/s), bytegroup+huffman %.3f s (%.0f MB/s)\n",
           sampled_s, (double)distinct / sampled_s / 1e6, baseline_s,
           (double)distinct / baseline_s / 1e6);
    printf("  programs (tensors, bytes):\n");
    for (size_t i = 0; i < n_pc; i++)
        printf("    %4zu %12zu  %s\n", pc[i].count, pc[i].bytes, pc[i].text);

    for (size_t i = 0; i < nt; i++) {
        tf_buf_free(&t[i].model);
        for (size_t c = 0; c < t[i].n_chunks; c++) {
            tf_buf_free(&t[i].chunks[c]);
            if (t[i].sampled)
                tf_buf_free(&t[i].sampled[c]);
        }
        free(t[i].chunks);
        free(t[i].sampled);
    }
    free(decoded);
    free(t);
    free(sample);
    tf_prog_prior_free(prior);
    tf_st_free(&h);
    free(file);
    return exact ? 0 : -1;
}

int main(int argc, char **argv)
{
    tf_malloc_reuse();
    unsigned budget = 0;
    bool learn_prior = true;
    int rc = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc)
            budget = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--no-prior") == 0)
            learn_prior = false;
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
            decode_rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: prog_bench [--budget N] [--no-prior] [--rounds N] FILE...\n");
            return 2;
        }
    }
    for (; i < argc; i++)
        rc |= bench_file(argv[i], budget, learn_prior) < 0;
    return rc;
}
