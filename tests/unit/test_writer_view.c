/* A writer of format version 2 that reads what each file needs from the
 * pages (store/writer_view.h) makes the catalog that a writer holding the
 * whole catalog makes, slot for slot: steps added one writer at a time,
 * chains bounded at 3 (reverse deltas, forward deltas, keyframes kept), a
 * copy of the newest under another name (found among the last commits'
 * files), a move and a change of mode of that copy (whose body the writer
 * reads to copy it), and a removal (which reads everything); and with one
 * writer for the whole run. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "store/archive.h"
#include "store/reader.h"
#include "store/writer.h"

#define CHUNK_SHIFT 8
#define N_ELEMS (3 * 4096 + 99) /* 49 chunks a tensor, the last short: a step's slots fill leaves of their own */
#define N_STEPS 14

static uint16_t weights[2][N_ELEMS];

/* Checkpoint k: two BF16 tensors, a few ULPs from step k-1. */
static void write_step(int k)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_ELEMS; i++)
            weights[t][i] = k == 1 ? (uint16_t)(0x3c00 + rng_next() % 0x800 - 0x400)
                                   : (uint16_t)(weights[t][i] + rng_next() % 7 - 3);
    const test_tensor ts[] = {
        { "a", "BF16", "[12387]", weights[0], sizeof weights[0] },
        { "b", "BF16", "[12387]", weights[1], sizeof weights[1] },
    };
    char name[64], path[TEST_PATH_MAX];
    snprintf(name, sizeof name, "step-%d.safetensors", k);
    test_write_safetensors(test_path(name, path), ts, ARRAY_LEN(ts));
}

/* A writer of the archive: one that holds the whole catalog, or one
 * that reads what it needs. */
static tf_writer *open_writer(const char *archive, bool whole, bool create)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.format_version = TF_FORMAT_PAGES;
    o.threads = 2;
    o.max_chain = 3;
    o.whole_catalog = whole;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(archive, create, CHUNK_SHIFT, &o, &w, &e) == 0, "%s", e.msg);
    return w;
}

/* Adds src as dest to the archive (src NULL: removes dest), by a writer
 * of its own. */
static void add(const char *archive, bool whole, bool create, const char *src, const char *dest)
{
    tf_writer *w = open_writer(archive, whole, create);
    tf_error e = { 0 };
    if (src)
        test_add(w, src, dest);
    else
        ck_assert_msg(tf_writer_remove(w, dest, &e) == 0, "%s", e.msg);
    tf_writer_close(w);
}

/* Moves `from` to `to` and gives it mode 0600, by a writer of its own. */
static void move(const char *archive, bool whole, const char *from, const char *to)
{
    tf_writer *w = open_writer(archive, whole, false);
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_move(w, from, to, &e) == 0, "%s", e.msg);
    tf_writer_close(w);
    w = open_writer(archive, whole, false);
    ck_assert_msg(tf_writer_set_attrs(w, to, 0600, (struct timespec){ 1, 0 }, &e) == 0, "%s",
                  e.msg);
    tf_writer_close(w);
}

/* The archives at a and b hold the same blobs (each slot's record but
 * its offset: a directory's time, which differs, shifts what follows)
 * and the same files, made of the same slots. */
static void expect_same_catalog(const char *a, const char *b)
{
    tf_archive *x, *y;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(a, NULL, &x, &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_archive_open(b, NULL, &y, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(tf_archive_nblobs(x), tf_archive_nblobs(y));
    for (uint64_t s = 0; s < tf_archive_nblobs(x); s++) {
        tf_blob p = test_blob(x, s), q = test_blob(y, s);
        ck_assert_msg(tf_blob_id_eq(&p.id, &q.id) && p.enc_len == q.enc_len &&
                          p.raw_len == q.raw_len && p.enc_hash == q.enc_hash &&
                          p.ref == q.ref && p.model == q.model && p.codec == q.codec &&
                          p.dtype == q.dtype,
                      "slot %llu differs", (unsigned long long)s);
    }
    ck_assert_uint_eq(tf_archive_nentries(x), tf_archive_nentries(y));
    for (size_t i = 0; i < tf_archive_nentries(x); i++) {
        const tf_entry *p = tf_archive_entry(x, i), *q = tf_archive_entry(y, i);
        ck_assert_str_eq(p->path, q->path);
        ck_assert_uint_eq(p->nchunks, q->nchunks);
        for (uint64_t c = 0; c < p->nchunks; c++)
            ck_assert_uint_eq(p->chunks[c], q->chunks[c]);
    }
    tf_archive_close(x);
    tf_archive_close(y);
}

START_TEST(reading_by_the_page_writes_the_same_archive)
{
    char lazy[TEST_PATH_MAX], whole[TEST_PATH_MAX], src[TEST_PATH_MAX];
    test_path("lazy.traj", lazy);
    test_path("whole.traj", whole);
    for (int k = 1; k <= N_STEPS; k++) {
        char name[64], dest[80];
        write_step(k);
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        snprintf(dest, sizeof dest, "run/%s", name);
        test_path(name, src);
        add(lazy, false, k == 1, src, dest);
        add(whole, true, k == 1, src, dest);
        if (k == 7) {
            add(lazy, false, false, src, "last.safetensors");
            add(whole, true, false, src, "last.safetensors");
        }
        if (k == 9) {
            move(lazy, false, "last.safetensors", "kept/last.safetensors");
            move(whole, true, "last.safetensors", "kept/last.safetensors");
        }
        if (k == 10) {
            add(lazy, false, false, NULL, "run/step-1.safetensors");
            add(whole, true, false, NULL, "run/step-1.safetensors");
        }
        expect_same_catalog(lazy, whole);
    }
    /* The copy took no payload of its own. */
    tf_archive *ar;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(lazy, NULL, &ar, &e) == 0, "%s", e.msg);
    const tf_entry *last = tf_archive_lookup(ar, "kept/last.safetensors");
    const tf_entry *seven = tf_archive_lookup(ar, "run/step-7.safetensors");
    ck_assert_ptr_nonnull(last);
    ck_assert_ptr_nonnull(seven);
    ck_assert_int_eq(tf_archive_entry_body(ar, last, &e), 0);
    ck_assert_int_eq(tf_archive_entry_body(ar, seven, &e), 0);
    ck_assert_uint_eq(last->nchunks, seven->nchunks);
    for (uint64_t c = 0; c < last->nchunks; c++)
        ck_assert_uint_eq(last->chunks[c], seven->chunks[c]);
    ck_assert_uint_eq(last->mode, 0600);
    tf_archive_close(ar);
    /* And reads back as its bytes. */
    size_t len;
    uint8_t *want = test_read_whole_file(test_path("step-7.safetensors", src), &len);
    ck_assert_msg(tf_archive_open(lazy, NULL, &ar, &e) == 0, "%s", e.msg);
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    uint8_t *got = malloc(len);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(got);
    last = tf_archive_lookup(ar, "kept/last.safetensors");
    ck_assert_int_eq(tf_reader_pread(r, last, 0, len, got, &e), (ssize_t)len);
    ck_assert_mem_eq(got, want, len);
    free(got);
    free(want);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* One writer for the whole run, as trajpack create: the counts of each
 * checkpoint's keyframes carried from the commit that made them. */
START_TEST(one_writer_writes_the_same_archive)
{
    char lazy[TEST_PATH_MAX], whole[TEST_PATH_MAX], src[TEST_PATH_MAX];
    /* A writer of an empty archive holds the table: the first step is
     * added by one of its own. */
    write_step(1);
    add(test_path("lazy.traj", lazy), false, true, test_path("step-1.safetensors", src),
        "run/step-1.safetensors");
    add(test_path("whole.traj", whole), true, true, src, "run/step-1.safetensors");
    tf_writer *l = open_writer(lazy, false, false);
    tf_writer *w = open_writer(whole, true, false);
    for (int k = 2; k <= N_STEPS; k++) {
        char name[64], dest[80];
        write_step(k);
        snprintf(name, sizeof name, "step-%d.safetensors", k);
        snprintf(dest, sizeof dest, "run/%s", name);
        test_add(l, test_path(name, src), dest);
        test_add(w, src, dest);
    }
    tf_writer_close(l);
    tf_writer_close(w);
    expect_same_catalog(lazy, whole);
}
END_TEST

static Suite *writer_view_suite(void)
{
    Suite *s = suite_create("writer_view");
    TCase *tc = tcase_create("writer");
    tcase_add_checked_fixture(tc, test_dir_make, test_dir_remove);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reading_by_the_page_writes_the_same_archive);
    tcase_add_test(tc, one_writer_writes_the_same_archive);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(writer_view_suite());
}
