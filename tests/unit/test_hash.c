/* Content ids (common/hash.h): XXH3 values and their hex form, and the
 * checksum of a file's bytes, copied on the way; MD5 (common/md5.h). */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "common/hash.h"
#include "common/md5.h"

START_TEST(hash_known_values_and_hex)
{
    /* Reference values of XXH3-64 and XXH3-128 (seed 0) of no bytes. */
    ck_assert_uint_eq(tf_hash64("", 0), 0x2d06800538d394c2ull);
    tf_blob_id id = tf_blob_id_of("", 0);
    char hex[33];
    tf_blob_id_hex(&id, hex);
    ck_assert_str_eq(hex, "99aa06d3014798d86001c324468d497f");

    tf_blob_id a = tf_blob_id_of("trajfs", 6), b = tf_blob_id_of("trajfs", 6);
    tf_blob_id c = tf_blob_id_of("trajfS", 6);
    ck_assert(tf_blob_id_eq(&a, &b));
    ck_assert(!tf_blob_id_eq(&a, &c));
    tf_blob_id_hex(&a, hex);
    ck_assert_uint_eq(strlen(hex), 32);
    ck_assert_uint_eq(strspn(hex, "0123456789abcdef"), 32);
}
END_TEST

/* RFC 1321's test suite, and runs of 'a' whose padding takes one block
 * or two (55, 56 bytes of a block), one block whole, and many. */
static const struct {
    const char *text;
    size_t a_run; /* when text is NULL: this many 'a's */
    const char *md5;
} md5_cases[] = {
    { "", 0, "d41d8cd98f00b204e9800998ecf8427e" },
    { "a", 0, "0cc175b9c0f1b6a831c399e269772661" },
    { "abc", 0, "900150983cd24fb0d6963f7d28e17f72" },
    { "message digest", 0, "f96b697d7cb7938d525a2f31aaf161d0" },
    { "abcdefghijklmnopqrstuvwxyz", 0, "c3fcd3d76192e4007dfb496cca67e13b" },
    { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 0,
      "d174ab98d277d9f5a5611c2c9f419d9f" },
    { "1234567890123456789012345678901234567890123456789012345678901234567890123456789"
      "0", 0, "57edf4a22be3c955ac49da2e2107b67a" },
    { NULL, 55, "ef1772b6dff9a122358552954ad0df65" },
    { NULL, 56, "3b0c8ac703f828b04c6c197006d17218" },
    { NULL, 63, "b06521f39153d618550606be297466d5" },
    { NULL, 64, "014842d480b571495a4a0363793f7367" },
    { NULL, 65, "c743a45e0d2e6a95cb859adae0248435" },
    { NULL, 1000, "cabe45dcc9ae5b66ba86600cca6b8ba8" },
};

START_TEST(md5_known_values)
{
    char a_run[1000];
    memset(a_run, 'a', sizeof a_run);
    const char *text = md5_cases[_i].text ? md5_cases[_i].text : a_run;
    size_t len = md5_cases[_i].text ? strlen(text) : md5_cases[_i].a_run;
    uint8_t d[16];
    tf_md5(text, len, d);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    ck_assert_str_eq(hex, md5_cases[_i].md5);
}
END_TEST

/* More than one piece of the file's reads (1 MiB) and not a multiple. */
#define FILE_BYTES ((size_t)(3 << 20) + 12345)

START_TEST(hash_of_a_file_is_of_its_bytes_and_copies_them)
{
    uint8_t *bytes = malloc(FILE_BYTES), *copied = malloc(FILE_BYTES);
    ck_assert(bytes && copied);
    for (size_t i = 0; i < FILE_BYTES; i++)
        bytes[i] = (uint8_t)(i * 2654435761u >> 11);
    char path[TEST_PATH_MAX], copy[TEST_PATH_MAX];
    test_write_file(test_path("src", path), bytes, FILE_BYTES);
    int fd = open(path, O_RDONLY);
    int to = open(test_path("copy", copy), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert(fd >= 0 && to >= 0);
    uint64_t h = 0;
    ck_assert(tf_hash64_file(fd, 7, FILE_BYTES - 7, -1, &h));
    ck_assert_uint_eq(h, tf_hash64(bytes + 7, FILE_BYTES - 7));
    ck_assert(tf_hash64_file(fd, 0, 0, -1, &h));
    ck_assert_uint_eq(h, tf_hash64("", 0));
    ck_assert(tf_hash64_file(fd, 0, FILE_BYTES, to, &h));
    ck_assert_uint_eq(h, tf_hash64(bytes, FILE_BYTES));
    ck_assert_int_eq(pread(to, copied, FILE_BYTES, 0), (ssize_t)FILE_BYTES);
    ck_assert_mem_eq(copied, bytes, FILE_BYTES);
    ck_assert(!tf_hash64_file(fd, 1, FILE_BYTES, -1, &h)); /* one byte past the end */
    close(fd), close(to);
    free(bytes), free(copied);
}
END_TEST

/* ---- tf_idmap ------------------------------------------------------------ */

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *ids = tcase_create("ids");
    tcase_add_test(ids, hash_known_values_and_hex);
    tcase_add_loop_test(ids, md5_known_values, 0, ARRAY_LEN(md5_cases));
    suite_add_tcase(s, ids);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, test_dir_make, test_dir_remove);
    tcase_add_test(files, hash_of_a_file_is_of_its_bytes_and_copies_them);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    return run_suite(hash_suite());
}
