#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/dtype.h"
#include "common/hash.h"

uint64_t rng_state;

uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_next();
}

uint8_t *exact_copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

void test_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void test_append_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    ck_assert_int_eq(close(fd), 0);
}

uint8_t *test_read_whole_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    *n = (size_t)size;
    uint8_t *p = malloc(*n + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, *n, f), *n);
    p[*n] = '\0';
    fclose(f);
    return p;
}

uint64_t test_file_size(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "cannot stat %s", path);
    return (uint64_t)st.st_size;
}

#define TEST_DIR_TEMPLATE "/tmp/trajfs-unit-XXXXXX"

char test_dir[sizeof TEST_DIR_TEMPLATE];

void test_dir_make(void)
{
    strcpy(test_dir, TEST_DIR_TEMPLATE);
    ck_assert_ptr_nonnull(mkdtemp(test_dir));
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP ? rmdir(path) : unlink(path))
        perror(path);
    return 0; /* remove what can be removed */
}

void test_dir_remove(void)
{
    /* Depth first, without following links out of the directory. */
    nftw(test_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *test_path(const char *name, char out[TEST_PATH_MAX])
{
    snprintf(out, TEST_PATH_MAX, "%s/%s", test_dir, name);
    return out;
}

unsigned test_format_version;

tf_writer *test_open_writer(const char *archive, bool create, unsigned chunk_shift,
                            unsigned threads, unsigned max_chain)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.format_version = test_format_version;
    o.threads = threads;
    o.max_chain = max_chain;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(archive, create, chunk_shift, &o, &w, &e) == 0, "%s", e.msg);
    return w;
}

void test_add(tf_writer *w, const char *src, const char *dest)
{
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_add(w, src, dest, NULL, &e) == 0, "%s", e.msg);
}

tf_blob test_blob(const tf_archive *ar, uint64_t idx)
{
    tf_blob b;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_blob(ar, idx, &b, &e) == 0, "%s", e.msg);
    return b;
}

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void test_write_safetensors_header(FILE *f, const test_tensor *t, size_t n)
{
    char *hdr = NULL;
    size_t len = 0, off = 0;
    FILE *h = open_memstream(&hdr, &len);
    ck_assert_ptr_nonnull(h);
    fputc('{', h);
    for (size_t i = 0; i < n; i++) {
        fprintf(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                i ? "," : "", t[i].name, t[i].dtype, t[i].shape, off, off + t[i].len);
        off += t[i].len;
    }
    fputc('}', h);
    for (long k = ftell(h); k % 8; k++)
        fputc(' ', h);
    ck_assert_int_eq(fclose(h), 0);
    uint8_t prefix[8];
    tf_le64_put(prefix, (uint64_t)len);
    ck_assert_uint_eq(fwrite(prefix, 1, 8, f), 8);
    ck_assert_uint_eq(fwrite(hdr, 1, len, f), len);
    free(hdr);
}

void test_write_safetensors(const char *path, const test_tensor *t, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    test_write_safetensors_header(f, t, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(fwrite(t[i].data, 1, t[i].len, f), t[i].len);
    ck_assert_int_eq(fclose(f), 0);
}

const unsigned test_float_dtypes[N_TEST_FLOAT_DTYPES] = {
    TF_DT_BF16, TF_DT_F16, TF_DT_F32, TF_DT_F64, TF_DT_F8_E4M3, TF_DT_F8_E5M2,
};

void test_put_elem(uint8_t *p, unsigned size, uint64_t v)
{
    for (unsigned i = 0; i < size; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int page_file_read(void *ctx, uint64_t off, void *buf, size_t len, uint64_t hash,
                          tf_error *e)
{
    test_page_file *f = ctx;
    if (off > f->bytes.len || len > f->bytes.len - off)
        return tf_fail(e, EIO, "read past the end");
    memcpy(buf, f->bytes.data + off, len);
    return tf_hash64(buf, len) == hash ? 0 : 1;
}

static int page_file_append(void *ctx, const uint8_t *p, size_t len, uint64_t *off, tf_error *e)
{
    test_page_file *f = ctx;
    *off = f->bytes.len;
    f->appends++;
    return tf_buf_put(&f->bytes, p, len) == 0 ? 0 : tf_fail(e, ENOMEM, "out of memory");
}

static uint64_t page_file_size(void *ctx)
{
    return ((test_page_file *)ctx)->bytes.len;
}

void test_page_file_init(test_page_file *f)
{
    static const uint8_t superblock[32];
    *f = (test_page_file){ .src = { page_file_read, page_file_size, f },
                           .sink = { page_file_append, NULL, f } };
    ck_assert_int_eq(tf_buf_put(&f->bytes, superblock, sizeof superblock), 0);
}

void test_page_file_free(test_page_file *f)
{
    tf_buf_free(&f->bytes);
}
