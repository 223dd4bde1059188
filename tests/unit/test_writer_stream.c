/* The writer streams: chunks larger than their sample, chosen for by
 * estimates, give the same archive on 1, 2 and 3 threads and read back
 * bit-exact; a checkpoint far larger than the writer's cache is added,
 * with its predecessor as reference, in memory bounded by the cache, not
 * by the file; the chunks of a file added go to the cache for the next
 * checkpoint's references, unless the writer was told that none
 * follows; a writer given no cache bound sizes its cache by the files
 * it adds. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testlib.h"

#include "codec/codec.h"
#include "common/hash.h"
#include "store/reader.h"
#include "store/writer.h"

/* A weight-like bfloat16 or float32 value for element i of step `step`
 * of a run: a function of (i, step) alone, so that any block of a file
 * can be made, and the next step is the last one plus a small update. */
static float value(uint64_t i, int step)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    double x = ((double)(h >> 11) / 9007199254740992.0 - 0.5) * 0.04;
    uint64_t g = h * 0x94d049bb133111ebull + (uint64_t)step;
    double update = ((double)(g >> 11) / 9007199254740992.0 - 0.5) * 4e-5;
    return (float)(x + step * update);
}

static void put_value(uint8_t *p, const char *dtype, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if (!strcmp(dtype, "BF16"))
        test_put_elem(p, 2, u >> 16);
    else
        test_put_elem(p, 4, u);
}

/* Writes a safetensors file of one tensor "w" of n elements of dtype
 * (BF16 or F32) at `step`, a block at a time. */
static void write_big(const char *path, const char *dtype, uint64_t n, int step)
{
    unsigned size = strcmp(dtype, "BF16") ? 4 : 2;
    char shape[32];
    snprintf(shape, sizeof shape, "[%llu]", (unsigned long long)n);
    const test_tensor w = { "w", dtype, shape, NULL, (size_t)(n * size) };
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    test_write_safetensors_header(f, &w, 1);
    enum { BLOCK = 1 << 16 };
    uint8_t *buf = malloc((size_t)BLOCK * size);
    ck_assert_ptr_nonnull(buf);
    for (uint64_t at = 0; at < n; at += BLOCK) {
        size_t m = n - at < BLOCK ? (size_t)(n - at) : BLOCK;
        for (size_t k = 0; k < m; k++)
            put_value(buf + k * size, dtype, value(at + k, step));
        ck_assert_uint_eq(fwrite(buf, size, m, f), m);
    }
    free(buf);
    ck_assert_int_eq(fclose(f), 0);
}

static tf_writer *open_writer(const char *archive, unsigned threads, size_t cache_bytes)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.threads = threads;
    o.cache_bytes = cache_bytes;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(archive, true, 16, &o, &w, &e) == 0, "%s", e.msg);
    return w;
}

/* The file at archive path dest reads back as the file at src, a block
 * at a time. */
static void check_file(tf_archive *ar, const char *dest, const char *src)
{
    const tf_entry *ent = tf_archive_lookup(ar, dest);
    ck_assert_ptr_nonnull(ent);
    tf_reader_ctx *r = tf_reader_new(ar, 4 << 20);
    FILE *f = fopen(src, "rb");
    ck_assert_ptr_nonnull(f);
    enum { BLOCK = 1 << 20 };
    uint8_t *want = malloc(BLOCK), *got = malloc(BLOCK);
    ck_assert(r && want && got);
    uint64_t off = 0;
    for (size_t n; (n = fread(want, 1, BLOCK, f)) > 0; off += n) {
        tf_error e = { 0 };
        ck_assert_msg(tf_reader_pread(r, ent, off, n, got, &e) == (ssize_t)n, "%s", e.msg);
        ck_assert_msg(memcmp(got, want, n) == 0, "%s differs at %llu", dest,
                      (unsigned long long)off);
    }
    ck_assert_uint_eq(off, ent->size);
    fclose(f);
    free(want);
    free(got);
    tf_reader_free(r);
}

static tf_archive *open_archive(const char *path)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* Three steps of a bfloat16 and a float32 tensor, each of several
 * chunks of 2^16 elements (larger than a sample). */
static void add_run(const char *archive, unsigned threads)
{
    tf_writer *w = open_writer(archive, threads, 0);
    for (int step = 1; step <= 3; step++) {
        static const char *const dtypes[] = { "BF16", "F32" };
        for (int d = 0; d < 2; d++) {
            char src[TEST_PATH_MAX], name[64];
            snprintf(name, sizeof name, "step-%d%s.safetensors", step, d ? ".optim" : "");
            write_big(test_path(name, src), dtypes[d], 300001, step);
            test_add(w, src, name);
        }
    }
    tf_writer_close(w);
}

START_TEST(test_threads_do_not_change_bytes)
{
    char a[3][TEST_PATH_MAX];
    for (unsigned t = 1; t <= 3; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%u.traj", t);
        add_run(test_path(name, a[t - 1]), t);
    }
    tf_archive *x = open_archive(a[0]);
    char src[TEST_PATH_MAX];
    check_file(x, "step-3.safetensors", test_path("step-3.safetensors", src));
    check_file(x, "step-3.optim.safetensors", test_path("step-3.optim.safetensors", src));
    bool deltas = false;
    for (unsigned t = 1; t < 3; t++) {
        tf_archive *y = open_archive(a[t]);
        ck_assert_uint_eq(tf_archive_nblobs(x), tf_archive_nblobs(y));
        for (uint64_t b = 0; b < tf_archive_nblobs(x); b++) {
            const tf_blob bx_rec = test_blob(x, b), *bx = &bx_rec, by_rec = test_blob(y, b), *by = &by_rec;
            ck_assert(tf_blob_id_eq(&bx->id, &by->id));
            ck_assert_uint_eq(bx->codec, by->codec);
            ck_assert_uint_eq(bx->enc_len, by->enc_len);
            ck_assert_uint_eq(bx->enc_hash, by->enc_hash); /* the encoded bytes themselves */
            ck_assert_uint_eq(bx->ref, by->ref);
            ck_assert_uint_eq(bx->model, by->model);
            deltas |= bx->codec == TF_CODEC_ULP;
        }
        tf_archive_close(y);
    }
    ck_assert_msg(deltas, "no chunk was stored as a delta");
    tf_archive_close(x);
}
END_TEST

#ifndef __SANITIZE_ADDRESS__ /* its shadow and quarantine are memory too */
/* Peak resident memory of this process so far, in bytes. */
static uint64_t peak_rss(void)
{
    struct rusage u;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &u), 0);
    return (uint64_t)u.ru_maxrss << 10;
}
#endif

/* Two checkpoints of a bfloat16 tensor of 2^26 elements (128 MiB each;
 * chunks of 2^16): with a cache of 8 MiB, the writer's memory stays a
 * small part of one file, also while it re-encodes the first as deltas
 * against the second. */
START_TEST(test_memory_bounded_by_the_cache)
{
    const uint64_t n = (uint64_t)1 << 26;
    char s1[TEST_PATH_MAX], s2[TEST_PATH_MAX], archive[TEST_PATH_MAX];
    write_big(test_path("step-1.safetensors", s1), "BF16", n, 1);
    write_big(test_path("step-2.safetensors", s2), "BF16", n, 2);
#ifndef __SANITIZE_ADDRESS__
    uint64_t before = peak_rss();
#endif
    tf_writer *w = open_writer(test_path("a.traj", archive), 2, 8 << 20);
    test_add(w, s1, "step-1.safetensors");
    test_add(w, s2, "step-2.safetensors");
    tf_writer_close(w);
#ifndef __SANITIZE_ADDRESS__
    uint64_t peak = peak_rss();
    /* cache and kept chunks (8 MiB each), chunks in flight: a few MiB
     * (24 MiB measured), where holding a file and its parent whole took
     * 256 MiB */
    ck_assert_msg(peak < before + ((uint64_t)64 << 20),
                  "adding 2 x 128 MiB took %llu MiB of memory",
                  (unsigned long long)((peak - before) >> 20));
#endif
    /* step-2, the newest, is keyframes, and step-1 was re-encoded as
     * deltas against it in the same bounded memory. */
    tf_archive *ar = open_archive(archive);
    check_file(ar, "step-1.safetensors", s1);
    check_file(ar, "step-2.safetensors", s2);
    const tf_entry *newest = tf_archive_lookup(ar, "step-2.safetensors");
    for (uint64_t c = 0; c < newest->nchunks; c++)
        ck_assert_uint_eq(test_blob(ar, newest->chunks[c]).ref, 0);
    const tf_entry *ent = tf_archive_lookup(ar, "step-1.safetensors");
    unsigned deltas = 0;
    for (uint64_t c = 0; c < ent->nchunks; c++)
        deltas += test_blob(ar, ent->chunks[c]).codec == TF_CODEC_ULP;
    ck_assert_uint_gt(deltas, ent->nchunks / 2);
    tf_archive_close(ar);
}
END_TEST

/* Adds step-1 and step-2 of a tensor through a new writer, telling it
 * before step-1 whether to keep its chunks for references; returns how
 * many blobs the writer's reader decoded (for step-2's references). */
static uint64_t decoded_for_references(bool keep)
{
    char s1[TEST_PATH_MAX], s2[TEST_PATH_MAX], archive[TEST_PATH_MAX];
    write_big(test_path("step-1.safetensors", s1), "F32", 200000, 1);
    write_big(test_path("step-2.safetensors", s2), "F32", 200000, 2);
    tf_writer *w = open_writer(test_path(keep ? "keep.traj" : "drop.traj", archive), 2, 0);
    tf_writer_keep_references(w, keep);
    test_add(w, s1, "step-1.safetensors");
    tf_writer_keep_references(w, true);
    test_add(w, s2, "step-2.safetensors");
    uint64_t decoded = tf_reader_get_counts(tf_writer_reader(w)).decoded;
    tf_writer_close(w);
    tf_archive *ar = open_archive(archive);
    check_file(ar, "step-2.safetensors", s2);
    tf_archive_close(ar);
    return decoded;
}

START_TEST(test_kept_chunks_serve_as_references)
{
    ck_assert_uint_eq(decoded_for_references(true), 0);
    ck_assert_uint_gt(decoded_for_references(false), 0);
}
END_TEST

/* Given no bound, the writer bounds its cache at 8 times the most one
 * file gave it, between 32 MiB and its default of 256 MiB; a bound
 * given stays. */
START_TEST(test_cache_bound_follows_the_files)
{
    const size_t mib = (size_t)1 << 20;
    char small[TEST_PATH_MAX], big[TEST_PATH_MAX], archive[TEST_PATH_MAX];
    write_big(test_path("small.safetensors", small), "F32", 200000, 1); /* 0.8 MB */
    write_big(test_path("big.safetensors", big), "BF16", (uint64_t)1 << 23, 1); /* 16 MiB */
    tf_writer *w = open_writer(test_path("a.traj", archive), 2, 0);
    const tf_reader_ctx *r = tf_writer_reader(w);
    ck_assert_uint_eq(tf_reader_cache_bound(r), 256 * mib);
    test_add(w, small, "run/step-1.safetensors");
    ck_assert_uint_eq(tf_reader_cache_bound(r), 32 * mib);
    test_add(w, big, "big/step-1.safetensors");
    ck_assert_uint_eq(tf_reader_cache_bound(r), 8 * 16 * mib);
    test_add(w, small, "run/step-2.safetensors"); /* less than the most */
    ck_assert_uint_eq(tf_reader_cache_bound(r), 8 * 16 * mib);
    tf_writer_close(w);

    w = open_writer(test_path("given.traj", archive), 2, 4 * mib);
    test_add(w, big, "big/step-1.safetensors");
    ck_assert_uint_eq(tf_reader_cache_bound(tf_writer_reader(w)), 4 * mib);
    tf_writer_close(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("writer_stream");
    TCase *tc = tcase_create("writer_stream");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, test_dir_make, test_dir_remove);
    tcase_add_test(tc, test_threads_do_not_change_bytes);
    tcase_add_test(tc, test_memory_bounded_by_the_cache);
    tcase_add_test(tc, test_kept_chunks_serve_as_references);
    tcase_add_test(tc, test_cache_bound_follows_the_files);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
