/* Reading a blob's stored payload (store/blob_io.h): its bytes, and damage
 * refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

#include "common/buf.h"
#include "store/blob_io.h"

/* An archive in the test directory holding one opaque file; returns it
 * open read-only, its only blob at *b. */
static tf_archive *archive_of_one_blob(const char *name, tf_blob *b)
{
    char path[TEST_PATH_MAX], src[TEST_PATH_MAX];
    FILE *f = fopen(test_path("data.bin", src), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 5000; i++)
        fprintf(f, "line %d of a file stored as opaque bytes\n", i);
    ck_assert_int_eq(fclose(f), 0);
    tf_writer *w = test_open_writer(test_path(name, path), true, 20, 1, 16);
    test_add(w, src, "data.bin");
    tf_writer_close(w);
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, NULL, &ar, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(tf_archive_nblobs(ar), 1);
    *b = test_blob(ar, 0);
    return ar;
}

START_TEST(blob_payload_reads_its_stored_bytes)
{
    tf_blob b;
    tf_archive *ar = archive_of_one_blob("a.traj", &b);
    tf_buf out = { 0 };
    tf_error e = { 0 };
    ck_assert_int_eq(tf_buf_put(&out, "left over", 9), 0);
    ck_assert_msg(tf_blob_read_payload(ar, &b, &out, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(out.len, b.enc_len);
    ck_assert(tf_hash64(out.data, out.len) == b.enc_hash);
    tf_buf_free(&out);
    tf_archive_close(ar);
}
END_TEST

START_TEST(blob_payload_damaged_is_refused)
{
    tf_blob b;
    tf_archive *ar = archive_of_one_blob("a.traj", &b);
    uint64_t at = b.offset + b.enc_len / 2;
    tf_archive_close(ar);
    char path[TEST_PATH_MAX];
    FILE *f = fopen(test_path("a.traj", path), "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)at, SEEK_SET), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, (long)at, SEEK_SET), 0);
    ck_assert_int_ne(fputc(c ^ 0x20, f), EOF);
    ck_assert_int_eq(fclose(f), 0);

    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, NULL, &ar, &e) == 0, "%s", e.msg);
    tf_buf out = { 0 };
    tf_blob b0 = test_blob(ar, 0);
    ck_assert_int_eq(tf_blob_read_payload(ar, &b0, &out, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_str_eq(e.msg, "checksum mismatch (stored bytes are damaged)");
    tf_buf_free(&out);
    tf_archive_close(ar);
}
END_TEST

START_TEST(blob_record_is_a_copy_and_past_the_table_refused)
{
    tf_blob b;
    tf_archive *ar = archive_of_one_blob("a.traj", &b);
    uint64_t offset = b.offset;
    ck_assert_uint_ge(offset, 32); /* after the superblock */
    b.offset = 0; /* a copy: the archive's record stays */
    ck_assert_uint_eq(test_blob(ar, 0).offset, offset);
    tf_error e = { 0 };
    tf_blob past = { .enc_len = 7 };
    ck_assert_int_eq(tf_archive_blob(ar, 1, &past, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_str_eq(e.msg, "blob 1: not in the catalog (1 blobs)");
    ck_assert_uint_eq(past.enc_len, 7); /* untouched */
    tf_archive_close(ar);
}
END_TEST

static Suite *blob_io_suite(void)
{
    Suite *s = suite_create("blob_io");
    TCase *payload = tcase_create("blob payloads");
    tcase_add_checked_fixture(payload, test_dir_make, test_dir_remove);
    tcase_add_test(payload, blob_payload_reads_its_stored_bytes);
    tcase_add_test(payload, blob_payload_damaged_is_refused);
    tcase_add_test(payload, blob_record_is_a_copy_and_past_the_table_refused);
    suite_add_tcase(s, payload);
    return s;
}

int main(void)
{
    return run_suite(blob_io_suite());
}
