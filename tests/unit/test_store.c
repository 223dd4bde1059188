/* Store layer: adding files through the writer and reading them back
 * through the reader, bit-exact; deduplication; keyframes; crash
 * recovery at every byte of a commit; damaged blobs; determinism. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#include "codec/codec.h"
#include "store/commit.h"
#include "store/prefetch.h"
#include "store/reader.h"
#include "store/writer.h"

static char path_buf[4][TEST_PATH_MAX];

static const char *tmp(int slot, const char *name)
{
    return test_path(name, path_buf[slot]);
}

/* A checkpoint: three BF16 tensors, an F32 tensor, an I64 buffer and a
 * copy of the first tensor (a tied weight). Step k perturbs the floats of
 * step k-1 by a few ULPs. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define CHUNK_SHIFT 12 /* chunks of 4096 elements */
#define N_BIG 5000 /* > one chunk */
#define N_SMALL 37
#define TWO_DTYPES_N 6000 /* two chunks */
static uint16_t big[N_BIG], small[N_SMALL];
static uint32_t f32[N_SMALL];
static int64_t ids[16];

static void init_weights(void)
{
    for (int i = 0; i < N_BIG; i++)
        big[i] = (uint16_t)(0x3c00 + (rng_next() % 0x800) - 0x400 + ((rng_next() & 1) << 15));
    for (int i = 0; i < N_SMALL; i++) {
        small[i] = (uint16_t)rng_next();
        f32[i] = (uint32_t)rng_next();
    }
    for (int i = 0; i < 16; i++)
        ids[i] = i;
}

static void step_weights(void)
{
    for (int i = 0; i < N_BIG; i++)
        big[i] = (uint16_t)(big[i] + (rng_next() % 5) - 2);
    for (int i = 0; i < N_SMALL; i++)
        f32[i] += (uint32_t)(rng_next() % 9) - 4;
}

static void write_checkpoint(const char *path)
{
    const test_tensor t[] = {
        { "ids", "I64", "[16]", ids, sizeof ids },
        { "f32", "F32", "[" STR(N_SMALL) "]", f32, sizeof f32 },
        { "big", "BF16", "[50,100]", big, sizeof big },
        { "small", "BF16", "[" STR(N_SMALL) "]", small, sizeof small },
        { "tied", "BF16", "[50,100]", big, sizeof big },
    };
    test_write_safetensors(path, t, ARRAY_LEN(t));
}

/* Writes checkpoints step-1..step-n into the temp dir and adds them. */
static void make_trajectory(const char *archive, int n, unsigned threads, unsigned max_chain)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    init_weights();
    tf_writer *w = test_open_writer(archive, true, CHUNK_SHIFT, threads, max_chain);
    for (int k = 1; k <= n; k++) {
        char name[64];
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        write_checkpoint(tmp(1, name));
        char dest[80];
        snprintf(dest, sizeof dest, "run/%s", name);
        test_add(w, tmp(1, name), dest);
        step_weights();
    }
    tf_writer_close(w);
}

static tf_archive *open_archive(const char *path)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* Every file of the archive equals its source in the temp dir. */
static void check_all_files(tf_archive *ar)
{
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (ent->kind == TF_ENTRY_DIR)
            continue;
        size_t n;
        uint8_t *want = test_read_whole_file(tmp(2, strrchr(ent->path, '/') + 1), &n);
        ck_assert_uint_eq(ent->size, n);
        uint8_t *got = malloc(n + 1);
        tf_error e = { 0 };
        ck_assert_msg(tf_reader_pread(r, ent, 0, n, got, &e) == (ssize_t)n, "%s", e.msg);
        ck_assert(memcmp(got, want, n) == 0);
        /* Unaligned small reads across header, tensor and chunk borders. */
        for (uint64_t off = 0; off < n; off += 1237) {
            size_t len = (size_t)(rng_next() % 3000);
            ssize_t m = tf_reader_pread(r, ent, off, len, got, &e);
            ck_assert_int_eq(m, (ssize_t)(n - off < len ? n - off : len));
            ck_assert(memcmp(got, want + off, (size_t)m) == 0);
        }
        free(got);
        free(want);
    }
    tf_reader_free(r);
}

START_TEST(test_roundtrip_and_codecs)
{
    /* Each step rewrites the checkpoint file, so check the last one only
     * against its bytes; earlier ones through a fresh trajectory each. */
    const char *a = tmp(0, "rt.traj");
    make_trajectory(a, 1, 2, 16);
    tf_archive *ar = open_archive(a);
    check_all_files(ar);
    tf_archive_close(ar);
    unlink(a);

    make_trajectory(a, 4, 2, 16);
    ar = open_archive(a);
    const tf_entry *last = tf_archive_lookup(ar, "run/step-4.safetensors");
    ck_assert_ptr_nonnull(last);
    ck_assert_ptr_nonnull(tf_archive_lookup(ar, "run"));
    ck_assert_int_eq(tf_archive_lookup(ar, "run")->kind, TF_ENTRY_DIR);
    /* step-4, the newest, is keyframes; step-3's BF16 chunks were
     * re-encoded as deltas against step-4's (reverse references). */
    write_checkpoint(tmp(1, "unused")); /* keeps rng in step with nothing */
    const tf_entry *prev = tf_archive_lookup(ar, "run/step-3.safetensors");
    ck_assert_ptr_nonnull(prev);
    for (uint64_t c = 0; c < last->nchunks; c++)
        ck_assert_uint_eq(test_blob(ar, last->chunks[c]).ref, 0);
    const tf_tensor_span *big3 = &prev->tensors[2], *big4 = &last->tensors[2];
    ck_assert_str_eq(tf_tensor_name(prev, 2), "big");
    for (uint64_t c = 0; c < 2; c++) { /* "big" is two chunks */
        const tf_blob b_rec = test_blob(ar, prev->chunks[big3->first_chunk + c]), *b = &b_rec;
        ck_assert_uint_eq(b->codec, TF_CODEC_ULP);
        ck_assert_uint_eq(b->ref, last->chunks[big4->first_chunk + c] + 1);
    }
    /* tied copy: same blobs as "big" */
    ck_assert_uint_eq(last->chunks[last->tensors[2].first_chunk],
                      last->chunks[last->tensors[4].first_chunk]);
    tf_archive_close(ar);
}
END_TEST

START_TEST(test_every_step_reads_back)
{
    const char *a = tmp(0, "steps.traj");
    rng_state = 0x1234567ull;
    init_weights();
    tf_writer *w = test_open_writer(a, true, CHUNK_SHIFT, 1, 16);
    uint8_t *want[5];
    size_t wlen[5];
    for (int k = 0; k < 5; k++) {
        write_checkpoint(tmp(1, "ck.safetensors"));
        want[k] = test_read_whole_file(tmp(1, "ck.safetensors"), &wlen[k]);
        char dest[64];
        snprintf(dest, sizeof dest, "step-%d.safetensors", k + 1);
        test_add(w, tmp(1, "ck.safetensors"), dest);
        step_weights();
    }
    tf_writer_close(w);
    tf_archive *ar = open_archive(a);
    tf_reader_ctx *r = tf_reader_new(ar, 0);
    for (int k = 4; k >= 0; k--) { /* newest first: walks whole chains */
        char dest[64];
        snprintf(dest, sizeof dest, "step-%d.safetensors", k + 1);
        const tf_entry *ent = tf_archive_lookup(ar, dest);
        ck_assert_ptr_nonnull(ent);
        uint8_t *got = malloc(wlen[k]);
        tf_error e = { 0 };
        ck_assert_msg(tf_reader_pread(r, ent, 0, wlen[k], got, &e) == (ssize_t)wlen[k], "%s", e.msg);
        ck_assert(memcmp(got, want[k], wlen[k]) == 0);
        free(got);
        free(want[k]);
    }
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

START_TEST(test_dedup_same_checkpoint)
{
    const char *a = tmp(0, "dedup.traj");
    make_trajectory(a, 1, 1, 16);
    struct stat before, after, src;
    ck_assert_int_eq(stat(a, &before), 0);
    ck_assert_int_eq(stat(tmp(1, "step-1.safetensors"), &src), 0);
    tf_writer *w = test_open_writer(a, false, CHUNK_SHIFT, 1, 16);
    test_add(w, tmp(1, "step-1.safetensors"), "copy/step-1.safetensors");
    tf_writer_close(w);
    ck_assert_int_eq(stat(a, &after), 0);
    /* Only the catalog grows: the header chunk is shared like the tensors. */
    ck_assert_int_lt(after.st_size - before.st_size, src.st_size / 20);
    tf_archive *ar = open_archive(a);
    const tf_entry *x = tf_archive_lookup(ar, "run/step-1.safetensors");
    const tf_entry *y = tf_archive_lookup(ar, "copy/step-1.safetensors");
    ck_assert_uint_eq(x->nchunks, y->nchunks);
    ck_assert(memcmp(x->chunks, y->chunks, x->nchunks * sizeof *x->chunks) == 0);
    tf_archive_close(ar);
}
END_TEST

/* The writer's content index, built at its first lookup, follows its
 * own later commits: a copy added in the same session is deduplicated
 * against a file committed after the index was built. */
START_TEST(test_dedup_within_one_writer)
{
    const char *a = tmp(0, "dedup1.traj");
    rng_state = 0x9e3779b97f4a7c15ull;
    init_weights();
    write_checkpoint(tmp(1, "one.safetensors"));
    step_weights();
    write_checkpoint(tmp(1, "two.safetensors"));
    tf_writer *w = test_open_writer(a, true, CHUNK_SHIFT, 2, 16);
    test_add(w, tmp(1, "one.safetensors"), "run/one.safetensors");
    test_add(w, tmp(1, "two.safetensors"), "run/two.safetensors");
    test_add(w, tmp(1, "two.safetensors"), "copy/two.safetensors");
    tf_writer_close(w);
    tf_archive *ar = open_archive(a);
    const tf_entry *x = tf_archive_lookup(ar, "run/two.safetensors");
    const tf_entry *y = tf_archive_lookup(ar, "copy/two.safetensors");
    ck_assert_uint_eq(x->nchunks, y->nchunks);
    ck_assert(memcmp(x->chunks, y->chunks, x->nchunks * sizeof *x->chunks) == 0);
    /* Found by content after the open too, each id at its first blob. */
    for (uint64_t i = 0; i < x->nchunks; i++) {
        const tf_blob b_rec = test_blob(ar, x->chunks[i]), *b = &b_rec;
        int64_t found = tf_archive_find_blob(ar, &b->id);
        ck_assert_int_ge(found, 0);
        tf_blob same = test_blob(ar, (uint64_t)found);
        ck_assert(tf_blob_id_eq(&same.id, &b->id));
        ck_assert_int_le(found, (int64_t)x->chunks[i]);
    }
    tf_archive_close(ar);
}
END_TEST

START_TEST(test_max_chain_bounds_depth)
{
    const char *a = tmp(0, "chain.traj");
    make_trajectory(a, 7, 2, 2);
    tf_archive *ar = open_archive(a);
    unsigned deepest = 0;
    for (uint64_t b = 0; b < tf_archive_nblobs(ar); b++)
        if (tf_archive_chain_depth(ar, b) > deepest)
            deepest = tf_archive_chain_depth(ar, b);
    ck_assert_uint_eq(deepest, 2);
    tf_archive_close(ar);
}
END_TEST

/* The chunks of one tensor coded in one job (big's two) as ULP deltas
 * share one model, stored once, and still read back byte for byte:
 * the keyframes a newer checkpoint supersedes (step 1, re-encoded as
 * deltas against step 2), and forward deltas (step 2, with the newest
 * no keyframe). */
static const struct {
    unsigned max_chain;
    const char *file; /* whose chunks of big are deltas */
} shared_model_cases[] = {
    { 16, "run/step-1.safetensors" },
    { 4096, "run/step-2.safetensors" },
};

START_TEST(test_deltas_of_a_tensor_share_a_model)
{
    const char *a = tmp(0, "shared_model.traj");
    unlink(a);
    make_trajectory(a, 2, 1, shared_model_cases[_i].max_chain);
    tf_archive *ar = open_archive(a);
    const tf_entry *ent = tf_archive_lookup(ar, shared_model_cases[_i].file);
    ck_assert_ptr_nonnull(ent);
    uint64_t t = 0;
    while (t < ent->ntensors && strcmp(tf_tensor_name(ent, t), "big") != 0)
        t++;
    ck_assert_uint_lt(t, ent->ntensors);
    uint64_t first = ent->tensors[t].first_chunk;
    const tf_blob c0_rec = test_blob(ar, ent->chunks[first]), *c0 = &c0_rec;
    const tf_blob c1_rec = test_blob(ar, ent->chunks[first + 1]), *c1 = &c1_rec;
    ck_assert_uint_eq(c0->codec, TF_CODEC_ULP);
    ck_assert_uint_eq(c1->codec, TF_CODEC_ULP);
    ck_assert_uint_ne(c0->model, 0);
    ck_assert_uint_eq(c0->model, c1->model);
    check_all_files(ar);
    tf_archive_close(ar);
}
END_TEST

static uint64_t decoded(const tf_reader_ctx *r)
{
    return tf_reader_get_counts(r).decoded;
}

/* Reads bytes [off, off+len) of ent and compares them with the file's. */
static void expect_bytes(tf_reader_ctx *r, const tf_entry *ent, const uint8_t *want, uint64_t off,
                         size_t len)
{
    uint8_t *got = malloc(len ? len : 1);
    tf_error e = { 0 };
    ck_assert_msg(tf_reader_pread(r, ent, off, len, got, &e) == (ssize_t)len, "%s", e.msg);
    ck_assert(memcmp(got, want + off, len) == 0);
    free(got);
}

static _Atomic unsigned holds, releases; /* by the prefetch threads */
static void count_hold(void *arg) { (void)arg; holds++; }
static void count_release(void *arg) { (void)arg; releases++; }

/* What a read makes the prefetcher decode ahead: nothing for one that
 * starts in the header, whatever it covers after it; the rest of a
 * tensor for one that starts in it (also for the first read of a file,
 * which shows no order yet); for a read that continues the first, the
 * next window too. The reads then decode nothing, and every
 * reconstruction ran inside the guard. */
START_TEST(test_prefetch_decodes_what_comes_next)
{
    const char *a = tmp(0, "pf.traj");
    make_trajectory(a, 6, 2, 4);
    size_t n;
    uint8_t *want = test_read_whole_file(tmp(1, "step-6.safetensors"), &n);
    tf_archive *ar = open_archive(a);
    const tf_entry *ent = tf_archive_lookup(ar, "run/step-6.safetensors");
    ck_assert_uint_eq(ent->size, n);
    tf_reader_ctx *r = tf_reader_new(ar, 64 << 20);
    tf_prefetch_guard guard = { count_hold, count_release, NULL };
    holds = releases = 0;
    tf_prefetch *p = tf_prefetch_new(ar, r, 2, 1 << 20, &guard);
    ck_assert_ptr_nonnull(p);
    tf_prefetch_cursor cur = { 0 };

    uint64_t header = ent->pieces[1].file_off;
    tf_prefetch_read(p, ent, &cur, 0, n); /* starts in the header */
    tf_prefetch_wait(p);
    ck_assert_uint_eq(decoded(r), 0);

    const tf_tensor_span *big_span = &ent->tensors[2]; /* two chunks */
    ck_assert_str_eq(tf_tensor_name(ent, 2), "big");
    tf_prefetch_read(p, ent, &cur, big_span->file_off + 1, 1);
    tf_prefetch_wait(p);
    uint64_t ahead = decoded(r);
    ck_assert_uint_ge(ahead, 2);
    ck_assert_uint_eq(holds, 2); /* one reconstruction per chunk, each in the guard */
    ck_assert_uint_eq(releases, holds);
    expect_bytes(r, ent, want, big_span->file_off, (size_t)big_span->nbytes);
    ck_assert_uint_eq(decoded(r), ahead);
    expect_bytes(r, ent, want, 0, n); /* the rest was not decoded ahead */
    ck_assert_uint_gt(decoded(r), ahead);
    tf_prefetch_free(p);
    tf_reader_free(r);

    r = tf_reader_new(ar, 64 << 20);
    p = tf_prefetch_new(ar, r, 2, n, NULL);
    cur = (tf_prefetch_cursor){ 0 };
    tf_prefetch_read(p, ent, &cur, header, 1); /* the first tensor only */
    tf_prefetch_wait(p);
    uint64_t first = decoded(r);
    ck_assert_uint_gt(first, 0);
    tf_prefetch_read(p, ent, &cur, header + 1, 1); /* in order: the rest */
    tf_prefetch_wait(p);
    ahead = decoded(r);
    ck_assert_uint_gt(ahead, first);
    expect_bytes(r, ent, want, header, n - (size_t)header);
    ck_assert_uint_eq(decoded(r), ahead);
    tf_prefetch_free(p);
    tf_reader_free(r);
    tf_prefetch_read(NULL, ent, &cur, 0, n); /* no prefetcher: nothing */
    tf_archive_close(ar);
    free(want);
}
END_TEST

/* tf_reader_pread_spans gives the bytes tf_reader_pread copies, as spans held
 * until released: whole files and unaligned ranges across header,
 * tensor and chunk borders, with a cache far smaller than the file. */
START_TEST(test_view_spans_are_the_bytes)
{
    const char *a = tmp(0, "view.traj");
    make_trajectory(a, 4, 2, 2);
    size_t n;
    uint8_t *want = test_read_whole_file(tmp(1, "step-4.safetensors"), &n);
    tf_archive *ar = open_archive(a);
    const tf_entry *ent = tf_archive_lookup(ar, "run/step-4.safetensors");
    tf_reader_ctx *r = tf_reader_new(ar, 1);
    tf_read_spans v = { 0 };
    uint8_t *got = malloc(n);
    rng_state = 0x7e57ull;
    for (int k = 0; k < 300; k++) {
        uint64_t off = k == 0 ? 0 : rng_next() % (n + 10);
        size_t len = k == 0 ? n + 5 : (size_t)(rng_next() % 20000);
        tf_error e = { 0 };
        ssize_t m = tf_reader_pread_spans(r, ent, off, len, &v, &e);
        size_t expect = off >= n ? 0 : n - off < len ? n - (size_t)off : len;
        ck_assert_msg(m == (ssize_t)expect, "%s", e.msg);
        size_t at = 0;
        for (size_t i = 0; i < v.n; i++) {
            ck_assert_uint_le(at + v.iov[i].iov_len, expect);
            memcpy(got + at, v.iov[i].iov_base, v.iov[i].iov_len);
            at += v.iov[i].iov_len;
        }
        ck_assert_uint_eq(at, expect);
        ck_assert(memcmp(got, want + off, expect) == 0);
        tf_reader_release_spans(r, &v);
    }
    tf_read_spans_free(&v);
    free(got);
    tf_reader_free(r);
    tf_archive_close(ar);
    free(want);
}
END_TEST

/* A read of more than TF_READ_SPANS_MAX pieces (one-element tensors) is
 * refused by tf_reader_pread_spans with E2BIG, holding nothing, and read by
 * tf_reader_pread. */
START_TEST(test_view_of_too_many_pieces)
{
    enum { N = TF_READ_SPANS_MAX + 200 };
    static test_tensor t[N];
    static char names[N][16];
    static uint16_t vals[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "t%05d", i);
        vals[i] = (uint16_t)(0x3f80 + i);
        t[i] = (test_tensor){ names[i], "BF16", "[1]", &vals[i], 2 };
    }
    const char *src = tmp(1, "many.safetensors"), *a = tmp(0, "many.traj");
    test_write_safetensors(src, t, N);
    tf_writer *w = test_open_writer(a, true, CHUNK_SHIFT, 1, 2);
    test_add(w, src, "many.safetensors");
    tf_writer_close(w);
    size_t n;
    uint8_t *want = test_read_whole_file(src, &n);
    tf_archive *ar = open_archive(a);
    const tf_entry *ent = tf_archive_lookup(ar, "many.safetensors");
    ck_assert_uint_gt(ent->npieces, TF_READ_SPANS_MAX);
    tf_reader_ctx *r = tf_reader_new(ar, 64 << 20);
    tf_read_spans v = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(tf_reader_pread_spans(r, ent, 0, n, &v, &e), -1);
    ck_assert_int_eq(e.errnum, E2BIG);
    ck_assert_uint_eq(v.nheld, 0);
    ck_assert_uint_eq(v.n, 0);
    expect_bytes(r, ent, want, 0, n);
    tf_read_spans_free(&v);
    tf_reader_free(r);
    tf_archive_close(ar);
    free(want);
}
END_TEST

/* The steps of a chain below the blob read are decoded but not kept the
 * first time: a cold read of the oldest checkpoint keeps none of the
 * later ones. A step met again is kept: reading a reverse chain oldest
 * first (as cp -r does) decodes the second checkpoint's chains again,
 * keeping their steps, and the later checkpoints then decode nothing.
 * Read newest down (the order references run in), each blob is decoded
 * once. */
START_TEST(test_chain_steps_kept_when_met_again)
{
    const char *a = tmp(0, "steps.traj");
    enum { STEPS = 6 };
    /* step 1 -> step 2 -> ... -> step 6, the newest keyframe */
    make_trajectory(a, STEPS, 2, 8);
    tf_archive *ar = open_archive(a);
    const tf_entry *oldest = tf_archive_lookup(ar, "run/step-1.safetensors");
    unsigned deepest = 0;
    for (uint64_t c = 0; c < oldest->nchunks; c++)
        if (tf_archive_chain_depth(ar, oldest->chunks[c]) > deepest)
            deepest = tf_archive_chain_depth(ar, oldest->chunks[c]);
    ck_assert_uint_eq(deepest, STEPS - 1);
    uint8_t *want[STEPS + 1];
    size_t n[STEPS + 1];
    const tf_entry *ent[STEPS + 1];
    for (int k = 1; k <= STEPS; k++) {
        char path[64], name[64];
        snprintf(path, sizeof path, "run/step-%d.safetensors", k);
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        want[k] = test_read_whole_file(tmp(1, name), &n[k]);
        ent[k] = tf_archive_lookup(ar, path);
    }

    /* one cold read keeps no step: the newest decodes again after it */
    tf_reader_ctx *r = tf_reader_new(ar, 64 << 20);
    expect_bytes(r, ent[1], want[1], 0, n[1]);
    uint64_t first = decoded(r);
    expect_bytes(r, ent[STEPS], want[STEPS], 0, n[STEPS]);
    ck_assert_uint_gt(decoded(r), first);
    tf_reader_free(r);

    /* oldest first: the second read decodes, the others find it all */
    r = tf_reader_new(ar, 64 << 20);
    expect_bytes(r, ent[1], want[1], 0, n[1]);
    first = decoded(r);
    expect_bytes(r, ent[2], want[2], 0, n[2]);
    uint64_t second = decoded(r);
    ck_assert_uint_gt(second, first);
    for (int k = 3; k <= STEPS; k++)
        expect_bytes(r, ent[k], want[k], 0, n[k]);
    ck_assert_uint_eq(decoded(r), second);
    ck_assert_uint_le(decoded(r), 2 * tf_archive_nblobs(ar));
    tf_reader_free(r);

    /* newest down: each blob once */
    r = tf_reader_new(ar, 64 << 20);
    for (int k = STEPS; k >= 1; k--)
        expect_bytes(r, ent[k], want[k], 0, n[k]);
    ck_assert_uint_le(decoded(r), tf_archive_nblobs(ar));
    tf_reader_free(r);
    tf_archive_close(ar);
    for (int k = 1; k <= STEPS; k++)
        free(want[k]);
}
END_TEST

/* Chains of nearest references as earlier releases wrote them (each
 * checkpoint the parent of the next, 19 deltas deep at the end) read
 * back byte for byte, through the prefetcher too. */
START_TEST(test_long_linear_chains_read)
{
    const char *a = tmp(0, "linear.traj");
    rng_state = 0x5eedull;
    init_weights();
    tf_writer *w = test_open_writer(a, true, CHUNK_SHIFT, 2, TF_CHAIN_MAX);
    enum { STEPS = 20 };
    for (int k = 1; k <= STEPS; k++) {
        char name[64], dest[80], parent[80];
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        snprintf(dest, sizeof dest, "run/%s", name);
        snprintf(parent, sizeof parent, "run/step-%d.safetensors", k - 1);
        write_checkpoint(tmp(1, name));
        tf_error e = { 0 };
        ck_assert_msg(tf_writer_add(w, tmp(1, name), dest, k > 1 ? parent : NULL, &e) == 0, "%s",
                      e.msg);
        step_weights();
    }
    tf_writer_close(w);
    tf_archive *ar = open_archive(a);
    unsigned deepest = 0;
    for (uint64_t b = 0; b < tf_archive_nblobs(ar); b++)
        if (tf_archive_chain_depth(ar, b) > deepest)
            deepest = tf_archive_chain_depth(ar, b);
    ck_assert_uint_eq(deepest, STEPS - 1);
    for (int k = STEPS; k >= 1; k -= 7) { /* each with a cold cache */
        char name[64], dest[80];
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        snprintf(dest, sizeof dest, "run/%s", name);
        size_t n;
        uint8_t *want = test_read_whole_file(tmp(1, name), &n);
        const tf_entry *ent = tf_archive_lookup(ar, dest);
        tf_reader_ctx *r = tf_reader_new(ar, 64 << 20);
        tf_prefetch *p = tf_prefetch_new(ar, r, 2, n, NULL);
        tf_prefetch_cursor cur = { 0 };
        tf_prefetch_read(p, ent, &cur, 0, n);
        expect_bytes(r, ent, want, 0, n);
        tf_prefetch_free(p);
        tf_reader_free(r);
        free(want);
    }
    tf_archive_close(ar);
}
END_TEST

START_TEST(test_threads_do_not_change_bytes)
{
    const char *a1 = tmp(0, "t1.traj");
    make_trajectory(a1, 3, 1, 16);
    const char *a2 = tmp(3, "t2.traj");
    make_trajectory(a2, 3, 2, 16);
    /* Catalogs hold mtimes of implicit directories, which differ between
     * the runs; every blob must be the same bytes, in the same order. */
    size_t n1, n2;
    uint8_t *p1 = test_read_whole_file(a1, &n1), *p2 = test_read_whole_file(a2, &n2);
    tf_archive *x = open_archive(a1), *y = open_archive(a2);
    ck_assert_uint_eq(tf_archive_nblobs(x), tf_archive_nblobs(y));
    for (uint64_t b = 0; b < tf_archive_nblobs(x); b++) {
        const tf_blob bx_rec = test_blob(x, b), *bx = &bx_rec, by_rec = test_blob(y, b), *by = &by_rec;
        ck_assert_uint_eq(bx->codec, by->codec);
        ck_assert_uint_eq(bx->enc_len, by->enc_len);
        ck_assert(memcmp(p1 + bx->offset, p2 + by->offset, bx->enc_len) == 0);
    }
    tf_archive_close(x);
    tf_archive_close(y);
    free(p1);
    free(p2);
}
END_TEST

START_TEST(test_truncation_inside_last_commit)
{
    const char *a = tmp(0, "trunc.traj");
    /* max_chain 0: step-2 leaves step-1 keyframes. A commit that redirects
     * gives the retired payloads back once durable, so the state before
     * it is gone for good and cutting it off could not read step-1. */
    make_trajectory(a, 2, 1, 0);
    tf_archive *ar = open_archive(a);
    ck_assert_uint_eq(tf_archive_commits(ar), 2); /* step-1 (with run/), step-2 */
    tf_archive_close(ar);
    /* Where did commit 2 end? Reopen a copy without the last commit. */
    size_t n;
    uint8_t *full = test_read_whole_file(a, &n);
    const char *t = tmp(3, "cut.traj");
    uint64_t prev_end = 0;
    for (uint64_t cut = n; cut-- > 32;) {
        test_write_file(t, full, cut);
        tf_archive *c = open_archive(t);
        uint64_t commits = tf_archive_commits(c);
        if (!prev_end) {
            ck_assert_uint_eq(commits, 1);
            ck_assert_ptr_null(tf_archive_lookup(c, "run/step-2.safetensors"));
            ck_assert_ptr_nonnull(tf_archive_lookup(c, "run/step-1.safetensors"));
            /* step-1 reads back intact */
            const tf_entry *ent = tf_archive_lookup(c, "run/step-1.safetensors");
            tf_reader_ctx *r = tf_reader_new(c, 0);
            uint8_t *buf = malloc(ent->size);
            tf_error e = { 0 };
            ck_assert_msg(tf_reader_pread(r, ent, 0, ent->size, buf, &e) == (ssize_t)ent->size, "%s", e.msg);
            free(buf);
            tf_reader_free(r);
            if (tf_archive_file_size(c) == cut)
                prev_end = cut; /* reached the previous commit's end */
        }
        tf_archive_close(c);
        if (prev_end)
            break;
    }
    ck_assert_uint_gt(prev_end, 0);
    /* A writer on a torn archive cuts the tail and commits after it. */
    test_write_file(t, full, (size_t)(prev_end + (n - prev_end) / 2));
    tf_writer *w = test_open_writer(t, false, CHUNK_SHIFT, 1, 16);
    test_add(w, tmp(1, "step-2.safetensors"), "again.safetensors");
    tf_writer_close(w);
    ar = open_archive(t);
    ck_assert_uint_eq(tf_archive_commits(ar), 2);
    ck_assert_ptr_nonnull(tf_archive_lookup(ar, "again.safetensors"));
    tf_archive_close(ar);
    free(full);
}
END_TEST

START_TEST(test_damaged_blob_names_tensor)
{
    const char *a = tmp(0, "flip.traj");
    make_trajectory(a, 1, 1, 16);
    tf_archive *ar = open_archive(a);
    const tf_entry *ent = tf_archive_lookup(ar, "run/step-1.safetensors");
    /* tensor 1 in data order is "f32" (I64 sorts first by offset) */
    const tf_blob b_rec = test_blob(ar, ent->chunks[ent->tensors[1].first_chunk]), *b = &b_rec;
    uint64_t at = b->offset + b->enc_len / 2;
    tf_archive_close(ar);
    size_t n;
    uint8_t *p = test_read_whole_file(a, &n);
    p[at] ^= 0x10;
    test_write_file(a, p, n);
    free(p);
    ar = open_archive(a);
    ent = tf_archive_lookup(ar, "run/step-1.safetensors");
    tf_reader_ctx *r = tf_reader_new(ar, 0);
    uint8_t *buf = malloc(ent->size);
    tf_error e = { 0 };
    ck_assert_int_eq(tf_reader_pread(r, ent, 0, ent->size, buf, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor \"f32\"") && strstr(e.msg, "checksum"), "%s", e.msg);
    /* The header and the other tensors still read. */
    uint64_t f32_end = ent->tensors[2].file_off;
    ck_assert_int_eq(tf_reader_pread(r, ent, f32_end, ent->size - f32_end, buf, &e),
                     (ssize_t)(ent->size - f32_end));
    free(buf);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* The archive at path holds the n bytes it held before (which this
 * frees) and opens. */
static void check_unchanged(const char *path, uint8_t *before, size_t n)
{
    size_t now;
    uint8_t *after = test_read_whole_file(path, &now);
    ck_assert_uint_eq(now, n);
    ck_assert(memcmp(before, after, n) == 0);
    tf_archive_close(open_archive(path));
    free(before);
    free(after);
}

START_TEST(test_bad_input_leaves_archive_unchanged)
{
    const char *a = tmp(0, "bad.traj");
    make_trajectory(a, 1, 1, 16);
    size_t n0;
    uint8_t *before = test_read_whole_file(a, &n0);
    const char *bad = tmp(1, "bad.safetensors");
    test_write_file(bad, "\x10\0\0\0\0\0\0\0{\"a\":1}         ", 24);
    tf_writer *w = test_open_writer(a, false, CHUNK_SHIFT, 1, 16);
    tf_error e = { 0 };
    ck_assert_int_eq(tf_writer_add(w, bad, "bad.safetensors", NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, "bad.safetensors") != NULL, "%s", e.msg);
    ck_assert_int_eq(tf_writer_add(w, bad, "../escape", NULL, &e), -1);
    ck_assert_int_eq(tf_writer_add(w, tmp(2, "missing"), "x", NULL, &e), -1);
    ck_assert_int_eq(tf_writer_add(w, bad, "run/step-1.safetensors/x", NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, "not a directory") != NULL, "%s", e.msg);
    tf_writer_close(w);
    check_unchanged(a, before, n0);
}
END_TEST

START_TEST(test_single_writer)
{
    const char *a = tmp(0, "lock.traj");
    make_trajectory(a, 1, 1, 16);
    tf_writer *w = test_open_writer(a, false, CHUNK_SHIFT, 1, 16);
    tf_writer *w2 = NULL;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_writer_open(a, false, CHUNK_SHIFT, NULL, &w2, &e), -1);
    ck_assert_int_eq(e.errnum, EBUSY);
    tf_archive *ar = open_archive(a); /* readers need no lock */
    tf_archive_close(ar);
    tf_writer_close(w);
}
END_TEST

/* A file of two tensors of N words, an I32 one and then an F32 one. */
static void write_two_dtypes(const char *path, const uint32_t *iv, const uint32_t *fv)
{
    const test_tensor t[] = {
        { "i", "I32", "[" STR(TWO_DTYPES_N) "]", iv, TWO_DTYPES_N * 4 },
        { "f", "F32", "[" STR(TWO_DTYPES_N) "]", fv, TWO_DTYPES_N * 4 },
    };
    test_write_safetensors(path, t, ARRAY_LEN(t));
}

/* Equal bytes in tensors of two dtypes are stored once; the next step's
 * F32 tensor, whose parent chunk is that (I32) blob, is no delta against
 * it (a delta's reference has its dtype), and everything reads back. */
START_TEST(test_equal_bytes_of_two_dtypes)
{
    enum { N = TWO_DTYPES_N };
    static uint32_t iv[N], fv[N];
    for (int k = 0; k < N; k++)
        iv[k] = fv[k] = 0x3f800000u + (uint32_t)(rng_next() % 4096);
    const char *a = tmp(0, "dtypes.traj");
    tf_writer *w = test_open_writer(a, true, CHUNK_SHIFT, 1, 16);
    write_two_dtypes(tmp(2, "step-1.safetensors"), iv, fv);
    test_add(w, tmp(2, "step-1.safetensors"), "run/step-1.safetensors");
    for (int k = 0; k < N; k++)
        fv[k] += (uint32_t)(rng_next() % 3);
    write_two_dtypes(tmp(2, "step-2.safetensors"), iv, fv);
    test_add(w, tmp(2, "step-2.safetensors"), "run/step-2.safetensors");
    tf_writer_close(w);

    tf_archive *ar = open_archive(a);
    const tf_entry *s1 = tf_archive_lookup(ar, "run/step-1.safetensors");
    ck_assert_ptr_nonnull(s1);
    ck_assert_uint_eq(s1->ntensors, 2);
    /* Shared: the F32 chunks are the I32 ones. */
    const uint64_t *i_chunks = s1->chunks + s1->tensors[0].first_chunk;
    const uint64_t *f_chunks = s1->chunks + s1->tensors[1].first_chunk;
    ck_assert_uint_eq(s1->tensors[1].first_chunk, s1->tensors[0].first_chunk + 2);
    ck_assert_uint_eq(f_chunks[0], i_chunks[0]);
    ck_assert_uint_eq(f_chunks[1], i_chunks[1]);
    const tf_entry *s2 = tf_archive_lookup(ar, "run/step-2.safetensors");
    ck_assert_ptr_nonnull(s2);
    for (uint64_t c = s2->tensors[1].first_chunk; c < s2->nchunks; c++) {
        const tf_blob b_rec = test_blob(ar, s2->chunks[c]), *b = &b_rec;
        if (b->ref)
            ck_assert_uint_eq(test_blob(ar, b->ref - 1).dtype, b->dtype);
    }
    check_all_files(ar);
    tf_archive_close(ar);
}
END_TEST

/* A commit that an open would refuse (here a file whose chunk blob holds
 * fewer bytes than its place) fails before it is written: the archive
 * file is unchanged and opens. */
START_TEST(test_commit_checked_before_written)
{
    const char *a = tmp(0, "checked.traj");
    make_trajectory(a, 1, 1, 16);
    size_t n0;
    uint8_t *before = test_read_whole_file(a, &n0);
    tf_writer *w = test_open_writer(a, false, CHUNK_SHIFT, 1, 16);
    tf_archive *ar = tf_writer_archive(w);
    _Atomic uint64_t next_ino = tf_archive_next_ino(ar);
    tf_write_opts o;
    tf_write_opts_default(&o);
    tf_commit c;
    tf_commit_begin(&c, ar, &o, &next_ino);
    tf_error e = { 0 };
    tf_buf payload = { 0 };
    ck_assert_int_eq(tf_buf_put(&payload, "0123456789", 10), 0);
    tf_blob_id id = tf_blob_id_of(payload.data, payload.len);
    int64_t blob = tf_commit_store_blob(&c, &id, &payload, 10, TF_CODEC_RAW, 0, 0, 0, &e);
    ck_assert_msg(blob >= 0, "%s", e.msg);
    tf_entry *ent = tf_commit_entry(&c, "short", TF_ENTRY_FILE, NULL, &e);
    ck_assert_msg(ent != NULL, "%s", e.msg);
    ent->size = 20;
    ent->nchunks = 1;
    ent->chunks = malloc(sizeof *ent->chunks);
    ent->chunks[0] = (uint64_t)blob;
    ck_assert_int_eq(tf_commit_finish(&c, &e), -1);
    ck_assert_msg(strstr(e.msg, "has 10 bytes, expected 20") != NULL, "%s", e.msg);
    tf_buf_free(&payload);
    tf_writer_close(w);
    check_unchanged(a, before, n0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, test_dir_make, test_dir_remove);
    tcase_add_test(tc, test_roundtrip_and_codecs);
    tcase_add_test(tc, test_every_step_reads_back);
    tcase_add_test(tc, test_dedup_same_checkpoint);
    tcase_add_test(tc, test_dedup_within_one_writer);
    tcase_add_test(tc, test_max_chain_bounds_depth);
    tcase_add_loop_test(tc, test_deltas_of_a_tensor_share_a_model, 0,
                        ARRAY_LEN(shared_model_cases));
    tcase_add_test(tc, test_view_spans_are_the_bytes);
    tcase_add_test(tc, test_view_of_too_many_pieces);
    tcase_add_test(tc, test_chain_steps_kept_when_met_again);
    tcase_add_test(tc, test_prefetch_decodes_what_comes_next);
    tcase_add_test(tc, test_long_linear_chains_read);
    tcase_add_test(tc, test_threads_do_not_change_bytes);
    tcase_add_test(tc, test_truncation_inside_last_commit);
    tcase_add_test(tc, test_damaged_blob_names_tensor);
    tcase_add_test(tc, test_bad_input_leaves_archive_unchanged);
    tcase_add_test(tc, test_single_writer);
    tcase_add_test(tc, test_equal_bytes_of_two_dtypes);
    tcase_add_test(tc, test_commit_checked_before_written);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
