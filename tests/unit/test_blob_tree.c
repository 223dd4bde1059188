/* The paged blob table (format/blob_tree.h): records read back through
 * new trees and old roots, copy on write touches only the path to what
 * changed, a scan since an offset reads the leaves written there, and
 * damaged or hostile pages fail with a clear error. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "common/hash.h"
#include "format/blob_tree.h"

static test_page_file file;

static void setup(void)
{
    test_page_file_init(&file);
}

static void teardown(void)
{
    test_page_file_free(&file);
}

/* Record n as its version v: every field differs from its neighbours'. */
static tf_blob record(uint64_t n, uint64_t v)
{
    uint64_t key[2] = { n, v };
    tf_blob b = { .offset = 4096 + n * 100 + v, .enc_len = 50 + n, .raw_len = (n % 7) << 40,
                  .enc_hash = (n + v) * 0x9e3779b97f4a7c15u, .codec = (uint8_t)(n % 5),
                  .dtype = (uint8_t)(v % 9), .ref = n ? n - 1 : 0, .model = v };
    b.id = tf_blob_id_of(key, sizeof key);
    return b;
}

static tf_blob_marks marks_of(uint8_t flags)
{
    return (tf_blob_marks){ flags, 0 };
}

static void expect_marked(tf_blob_tree *t, uint64_t n, uint64_t v, tf_blob_marks want_marks)
{
    tf_error e;
    tf_blob got, want = record(n, v);
    tf_blob_marks marks = { 0xff, 0xff };
    ck_assert_msg(tf_blob_tree_get(t, n, &got, &marks, &e) == 0, "slot %llu: %s",
                  (unsigned long long)n, e.msg);
    ck_assert(tf_blob_id_eq(&got.id, &want.id));
    ck_assert_uint_eq(got.offset, want.offset);
    ck_assert_uint_eq(got.enc_len, want.enc_len);
    ck_assert_uint_eq(got.raw_len, want.raw_len);
    ck_assert_uint_eq(got.enc_hash, want.enc_hash);
    ck_assert_uint_eq(got.codec, want.codec);
    ck_assert_uint_eq(got.dtype, want.dtype);
    ck_assert_uint_eq(got.ref, want.ref);
    ck_assert_uint_eq(got.model, want.model);
    ck_assert_uint_eq(marks.flags, want_marks.flags);
    ck_assert_uint_eq(marks.above, want_marks.above);
}

static void expect(tf_blob_tree *t, uint64_t n, uint64_t v, uint8_t want_flags)
{
    expect_marked(t, n, v, marks_of(want_flags));
}

/* Appends records [from, to) (version 0) and writes them. */
static tf_page_ref append(tf_blob_tree *t, uint64_t from, uint64_t to)
{
    tf_error e;
    for (uint64_t i = from; i < to; i++) {
        tf_blob b = record(i, 0);
        ck_assert_int_eq(tf_blob_tree_set(t, i, &b, marks_of(0), &e), 0);
    }
    tf_page_ref root;
    ck_assert_msg(tf_blob_tree_write(t, &file.sink, &root, &e) == 0, "%s", e.msg);
    return root;
}

#define LEAF TF_BLOB_LEAF_RECORDS
#define SPAN ((uint64_t)TF_BLOB_LEAF_RECORDS * TF_BLOB_FANOUT) /* records under a level-1 node */

START_TEST(heights)
{
    ck_assert_uint_eq(tf_blob_tree_height(0), 0);
    ck_assert_uint_eq(tf_blob_tree_height(LEAF), 0);
    ck_assert_uint_eq(tf_blob_tree_height(LEAF + 1), 1);
    ck_assert_uint_eq(tf_blob_tree_height(SPAN), 1);
    ck_assert_uint_eq(tf_blob_tree_height(SPAN + 1), 2);
    ck_assert_uint_eq(tf_blob_tree_height(SPAN * TF_BLOB_FANOUT + 1), 3);
}
END_TEST

START_TEST(empty_tree_has_no_records)
{
    tf_error e;
    tf_blob_tree *t = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    ck_assert_ptr_nonnull(t);
    tf_blob b;
    ck_assert_uint_eq(tf_blob_tree_count(t), 0);
    ck_assert_int_eq(tf_blob_tree_get(t, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not in the catalog"));
    tf_page_ref root = { .len = 7 };
    ck_assert_int_eq(tf_blob_tree_write(t, &file.sink, &root, &e), 0);
    ck_assert_uint_eq(root.len, 0); /* nothing staged: nothing written */
    ck_assert_uint_eq(file.appends, 0);
    tf_blob_tree_free(t);
}
END_TEST

/* Commits of every size, the tree growing from one leaf to three
 * levels, each read back through a new tree on the new root, and the
 * records set within a commit read back before it is written. */
START_TEST(commits_read_back_through_new_trees)
{
    static const uint64_t ends[] = { 1, 63, 64, 65, 200, SPAN, SPAN + 1, 3 * SPAN + 5,
                                     SPAN * TF_BLOB_FANOUT + 3 };
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    uint64_t n = 0;
    tf_page_ref root = { 0 };
    for (size_t c = 0; c < sizeof ends / sizeof *ends; c++) {
        tf_error e;
        tf_blob b = record(n, 0);
        ck_assert_int_eq(tf_blob_tree_set(w, n, &b, marks_of(0), &e), 0);
        expect(w, n, 0, 0); /* staged, read back */
        root = append(w, n + 1, ends[c]);
        n = ends[c];
        ck_assert_uint_eq(tf_blob_tree_count(w), n);
        tf_blob_tree *r = tf_blob_tree_new(&file.src, &root, n, 1 << 20);
        for (uint64_t i = 0; i < n; i += 1 + i / 97)
            expect(r, i, 0, 0);
        expect(r, n - 1, 0, 0);
        ck_assert_int_eq(tf_blob_tree_get(r, n, &b, NULL, &e), -1);
        tf_blob_tree_free(r);
    }
    tf_blob_tree_free(w);
}
END_TEST

/* A commit rewrites only the leaves it changes and their parents; the
 * old root still reads the records as they were. */
START_TEST(copy_on_write_keeps_old_roots)
{
    const uint64_t n = 3 * SPAN; /* height 2 */
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref old = append(w, 0, n);
    size_t before = file.appends;
    tf_error e;
    /* Two records of one leaf under the second level-1 node, and one
     * new record: two leaves, two level-1 nodes, the root. */
    tf_blob b = record(SPAN + 5, 1);
    ck_assert_int_eq(tf_blob_tree_set(w, SPAN + 5, &b, (tf_blob_marks){ TF_BLOB_REDIRECTED, 7 }, &e), 0);
    b = record(SPAN + 6, 1);
    ck_assert_int_eq(tf_blob_tree_set(w, SPAN + 6, &b, (tf_blob_marks){ TF_BLOB_DEAD | TF_BLOB_MODEL, 9 }, &e), 0);
    b = record(n, 0);
    ck_assert_int_eq(tf_blob_tree_set(w, n, &b, marks_of(0), &e), 0);
    tf_page_ref now;
    ck_assert_int_eq(tf_blob_tree_write(w, &file.sink, &now, &e), 0);
    ck_assert_uint_eq(file.appends - before, 5);

    tf_blob_tree *r = tf_blob_tree_new(&file.src, &now, n + 1, 1 << 20);
    expect(r, SPAN + 4, 0, 0);
    /* A redirect keeps its chain count; other records keep none. */
    expect_marked(r, SPAN + 5, 1, (tf_blob_marks){ TF_BLOB_REDIRECTED, 7 });
    expect(r, SPAN + 6, 1, TF_BLOB_DEAD | TF_BLOB_MODEL);
    expect(r, n, 0, 0);
    expect(r, 0, 0, 0);
    tf_blob_tree_free(r);
    r = tf_blob_tree_new(&file.src, &old, n, 1 << 20);
    expect(r, SPAN + 5, 0, 0);
    expect(r, SPAN + 6, 0, 0);
    ck_assert_int_eq(tf_blob_tree_get(r, n, &b, NULL, &e), -1);
    tf_blob_tree_free(r);
    tf_blob_tree_free(w);
}
END_TEST

START_TEST(discard_drops_staged_changes)
{
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref root = append(w, 0, 100);
    tf_error e;
    tf_blob b = record(3, 1);
    ck_assert_int_eq(tf_blob_tree_set(w, 3, &b, marks_of(0), &e), 0);
    b = record(100, 0);
    ck_assert_int_eq(tf_blob_tree_set(w, 100, &b, marks_of(0), &e), 0);
    ck_assert_uint_eq(tf_blob_tree_count(w), 101);
    tf_blob_tree_discard(w);
    ck_assert_uint_eq(tf_blob_tree_count(w), 100);
    expect(w, 3, 0, 0);
    tf_page_ref same;
    ck_assert_int_eq(tf_blob_tree_write(w, &file.sink, &same, &e), 0);
    ck_assert_uint_eq(same.off, root.off);
    tf_blob_tree_free(w);
}
END_TEST

START_TEST(bad_sets_are_refused)
{
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_error e;
    tf_blob b = record(0, 0);
    ck_assert_int_eq(tf_blob_tree_set(w, 1, &b, marks_of(0), &e), -1); /* a gap */
    ck_assert_int_eq(tf_blob_tree_set(w, 0, &b, marks_of(0x80), &e), -1); /* unknown flag */
    ck_assert_uint_eq(tf_blob_tree_count(w), 0);
    tf_blob_tree_free(w);
}
END_TEST

/* The smallest cache (one set of pages) serves every lookup, re-reading
 * as it must. */
START_TEST(tiny_cache_reads_right)
{
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref root = append(w, 0, 2 * SPAN + 9);
    tf_blob_tree *r = tf_blob_tree_new(&file.src, &root, 2 * SPAN + 9, 1);
    for (uint64_t i = 0; i < 2 * SPAN + 9; i += 13)
        expect(r, i, 0, 0);
    tf_blob_tree_free(r);
    tf_blob_tree_free(w);
}
END_TEST

/* Damaged and hostile pages fail each lookup that reads them. */
START_TEST(damaged_pages_fail)
{
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref root = append(w, 0, SPAN + 1); /* two leaves, a root node */
    tf_error e;
    tf_blob b;

    /* A flipped byte in the root. */
    file.bytes.data[root.off + root.len / 2] ^= 1;
    tf_blob_tree *r = tf_blob_tree_new(&file.src, &root, SPAN + 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "checksum mismatch"));
    tf_blob_tree_free(r);
    file.bytes.data[root.off + root.len / 2] ^= 1;

    /* A root read as a tree of another size: counts do not match. */
    r = tf_blob_tree_new(&file.src, &root, 5 * SPAN, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "expected"));
    tf_blob_tree_free(r);

    /* A stored length no page can have, and one past the file. */
    tf_page_ref huge = root;
    huge.len = UINT32_MAX;
    r = tf_blob_tree_new(&file.src, &huge, SPAN + 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "out of range"));
    tf_blob_tree_free(r);
    tf_page_ref past = root;
    past.off = file.bytes.len - 4;
    r = tf_blob_tree_new(&file.src, &past, SPAN + 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    tf_blob_tree_free(r);

    /* A leaf where a node must be: kind or level refused. */
    tf_blob_tree *one = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref leaf = append(one, 0, 3);
    r = tf_blob_tree_new(&file.src, &leaf, SPAN + 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "was expected"));
    tf_blob_tree_free(r);
    tf_blob_tree_free(one);
    tf_blob_tree_free(w);
}
END_TEST

/* A well-formed page whose record has a flag no release knows. */
START_TEST(unknown_flags_fail)
{
    tf_blob b = record(0, 0);
    uint8_t rec[TF_BLOB_RECORD_SIZE];
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    tf_page_ref root = append(w, 0, 1);
    tf_blob_tree *r = tf_blob_tree_new(&file.src, &root, 1, 1 << 20);
    tf_error e;
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), 0);
    tf_blob_tree_free(r);
    /* Rewrite the leaf by hand with flag bit 7 set. */
    memset(rec, 0, sizeof rec);
    rec[66] = 0x80;
    tf_page_ref bad;
    ck_assert_int_eq(tf_page_write(&file.sink, TF_PAGE_BLOB_LEAF, 0, 1, rec, sizeof rec, &bad, &e), 0);
    r = tf_blob_tree_new(&file.src, &bad, 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "unknown flags"));
    tf_blob_tree_free(r);
    /* A chain count on a record that no redirect wrote. */
    rec[66] = TF_BLOB_MODEL;
    rec[67] = 3;
    ck_assert_int_eq(tf_page_write(&file.sink, TF_PAGE_BLOB_LEAF, 0, 1, rec, sizeof rec, &bad, &e), 0);
    r = tf_blob_tree_new(&file.src, &bad, 1, 1 << 20);
    ck_assert_int_eq(tf_blob_tree_get(r, 0, &b, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "unknown flags"));
    tf_blob_tree_free(r);
    tf_blob_tree_free(w);
}
END_TEST

typedef struct {
    uint64_t slots[4 * TF_BLOB_LEAF_RECORDS];
    size_t n;
} seen_slots;

static int see_slot(void *arg, uint64_t slot, const tf_blob *b, tf_blob_marks marks, tf_error *e)
{
    seen_slots *s = arg;
    (void)b;
    (void)marks;
    (void)e;
    ck_assert_uint_lt(s->n, 4 * TF_BLOB_LEAF_RECORDS);
    s->slots[s->n++] = slot;
    return 0;
}

/* The leaves written at an offset or after: those of the commits since,
 * new and rewritten, and no other. */
START_TEST(scan_since_reads_leaves_written_since)
{
    tf_blob_tree *w = tf_blob_tree_new(&file.src, NULL, 0, 1 << 20);
    uint64_t n = 3 * SPAN;
    append(w, 0, n);
    uint64_t since = file.bytes.len;
    tf_error e;
    /* A record in the first leaf rewritten, one leaf appended. */
    tf_blob b = record(5, 1);
    ck_assert_int_eq(tf_blob_tree_set(w, 5, &b, (tf_blob_marks){ TF_BLOB_REDIRECTED, 2 }, &e), 0);
    tf_page_ref root = append(w, n, n + LEAF);
    tf_blob_tree *r = tf_blob_tree_new(&file.src, &root, n + LEAF, 1 << 20);
    seen_slots seen = { .n = 0 };
    ck_assert_msg(tf_blob_tree_scan_since(r, since, see_slot, &seen, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(seen.n, 2 * LEAF);
    for (size_t i = 0; i < LEAF; i++) {
        ck_assert_uint_eq(seen.slots[i], i);
        ck_assert_uint_eq(seen.slots[LEAF + i], n + i);
    }
    tf_blob_tree_free(r);
    tf_blob_tree_free(w);
}
END_TEST

static Suite *blob_tree_suite(void)
{
    Suite *s = suite_create("blob_tree");
    TCase *tc = tcase_create("tree");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, heights);
    tcase_add_test(tc, empty_tree_has_no_records);
    tcase_add_test(tc, commits_read_back_through_new_trees);
    tcase_add_test(tc, copy_on_write_keeps_old_roots);
    tcase_add_test(tc, discard_drops_staged_changes);
    tcase_add_test(tc, bad_sets_are_refused);
    tcase_add_test(tc, tiny_cache_reads_right);
    tcase_add_test(tc, damaged_pages_fail);
    tcase_add_test(tc, unknown_flags_fail);
    tcase_add_test(tc, scan_since_reads_leaves_written_since);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(blob_tree_suite());
}
