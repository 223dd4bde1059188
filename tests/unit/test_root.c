/* The root page (format/root.h): read back field by field, and refused
 * when damaged or when its fields break their rules. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "testlib.h"

#include "common/hash.h"
#include "common/zstd_frame.h"
#include "format/root.h"

static test_page_file file;

static void setup(void)
{
    test_page_file_init(&file);
}

static void teardown(void)
{
    test_page_file_free(&file);
}

/* Writes root r to the file; *ref names it. */
static int root_write(const tf_root *r, tf_page_ref *ref, tf_error *e)
{
    tf_buf raw = { 0 }, stored = { 0 };
    int rc = tf_root_encode(r, &raw, e);
    if (rc == 0)
        rc = tf_zstd_compress(raw.data, raw.len, 3, &stored, e);
    tf_buf_free(&raw);
    if (rc == 0) {
        *ref = (tf_page_ref){ .len = (uint32_t)stored.len,
                              .hash = tf_hash64(stored.data, stored.len) };
        rc = file.sink.append(file.sink.ctx, stored.data, stored.len, &ref->off, e);
    }
    tf_buf_free(&stored);
    return rc;
}

static tf_root sample(void)
{
    return (tf_root){ .seq = 9, .nblobs = 1000, .next_ino = 77, .nentries = 12,
                      .blobs = { 4096, 300, 0x1111 }, .entries = { 8192, 200, 0x2222 },
                      .entries_height = 1, .retired = { 9000, 40, 0x3333 },
                      .retired_bytes = 123456, .window = { 10, 200, 600, 900 } };
}

static void expect_ref(const tf_page_ref *a, const tf_page_ref *b)
{
    ck_assert_uint_eq(a->off, b->off);
    ck_assert_uint_eq(a->len, b->len);
    ck_assert_uint_eq(a->hash, b->hash);
}

START_TEST(root_reads_back)
{
    tf_error e;
    tf_root r = sample(), got;
    tf_page_ref ref;
    ck_assert_int_eq(root_write(&r, &ref, &e), 0);
    ck_assert_msg(tf_root_read(&file.src, &ref, &got, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(got.seq, r.seq);
    ck_assert_uint_eq(got.nblobs, r.nblobs);
    ck_assert_uint_eq(got.next_ino, r.next_ino);
    ck_assert_uint_eq(got.nentries, r.nentries);
    ck_assert_uint_eq(got.entries_height, r.entries_height);
    ck_assert_uint_eq(got.retired_bytes, r.retired_bytes);
    expect_ref(&got.blobs, &r.blobs);
    expect_ref(&got.entries, &r.entries);
    expect_ref(&got.retired, &r.retired);
    for (int i = 0; i < TF_ROOT_WINDOW; i++)
        ck_assert_uint_eq(got.window[i], r.window[i]);
}
END_TEST

/* Broken root i into *r, and the reason it must be refused for; NULL
 * past the last. */
static const char *broken(int i, tf_root *r)
{
    *r = sample();
    switch (i) {
    case 0: r->seq = 0; return "no commit number";
    case 1: r->next_ino = 1; return "inode numbers below 2";
    case 2: r->nblobs = 0; return "blob tree and count disagree";
    case 3: r->entries.len = 0; return "entries tree and count disagree";
    case 4: r->entries_height = 200; return "entries tree too tall";
    case 5: r->window[1] = 5; return "window out of order";
    case 6: r->window[3] = 1001; return "window out of order";
    }
    return NULL;
}

/* Each rule broken alone is refused with its reason. */
START_TEST(broken_rules_are_refused)
{
    tf_root r;
    const char *why;
    for (int i = 0; (why = broken(i, &r)) != NULL; i++) {
        tf_error e;
        tf_root got;
        tf_page_ref ref;
        ck_assert_int_eq(root_write(&r, &ref, &e), 0);
        ck_assert_int_eq(tf_root_read(&file.src, &ref, &got, &e), -1);
        ck_assert_msg(strstr(e.msg, why) != NULL, "%s: got \"%s\"", why, e.msg);
    }
}
END_TEST

START_TEST(damaged_roots_are_refused)
{
    tf_error e;
    tf_root r = sample(), got;
    tf_page_ref ref;
    ck_assert_int_eq(root_write(&r, &ref, &e), 0);
    file.bytes.data[ref.off + ref.len - 1] ^= 0x40;
    ck_assert_int_eq(tf_root_read(&file.src, &ref, &got, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "checksum mismatch"));

    /* A root page of the wrong size, and one with reserved bytes set. */
    uint8_t rec[TF_ROOT_RECORD_SIZE + 8] = { 0 };
    ck_assert_int_eq(tf_page_write(&file.sink, TF_PAGE_ROOT, 0, 1, rec, sizeof rec, &ref, &e), 0);
    ck_assert_int_eq(tf_root_read(&file.src, &ref, &got, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "expected"));
    ck_assert_int_eq(root_write(&r, &ref, &e), 0);
    tf_page pg;
    ck_assert_int_eq(tf_page_read(&file.src, &ref, TF_PAGE_ROOT, 0, &pg, &e), 0);
    pg.data[TF_ROOT_RECORD_SIZE - 1] = 1;
    ck_assert_int_eq(tf_page_write(&file.sink, TF_PAGE_ROOT, 0, 1, pg.data, pg.len, &ref, &e), 0);
    tf_page_free(&pg);
    ck_assert_int_eq(tf_root_read(&file.src, &ref, &got, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "reserved"));
}
END_TEST

static Suite *root_suite(void)
{
    Suite *s = suite_create("root");
    TCase *tc = tcase_create("root");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, root_reads_back);
    tcase_add_test(tc, broken_rules_are_refused);
    tcase_add_test(tc, damaged_roots_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(root_suite());
}
