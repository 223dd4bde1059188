/* What the unit tests share: a seeded random number generator, exactly
 * sized heap copies, whole files written and read, a temporary directory
 * per test, safetensors files and an archive writer, and main's running of a Check suite. */
#ifndef TRAJFS_TESTS_TESTLIB_H
#define TRAJFS_TESTS_TESTLIB_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "format/page.h"
#include "store/writer.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* SplitMix64. A test seeds it by setting rng_state (any value) and gets
 * the same numbers on every run and machine. */
extern uint64_t rng_state;
uint64_t rng_next(void);
/* n bytes of rng_next. */
void fill_random(uint8_t *p, size_t n);

/* A heap copy of exactly n bytes, so that reading one byte past it is an
 * ASan error. Fails the test when out of memory. */
uint8_t *exact_copy(const uint8_t *p, size_t n);

/* Writes the n bytes at p as the file path (created, or truncated). */
void test_write_file(const char *path, const void *p, size_t n);
/* Appends the n bytes at p to the file path, which exists. */
void test_append_file(const char *path, const void *p, size_t n);
/* The whole file path, its size in *n, in a heap buffer with a NUL after
 * it (so that a text file is a string). */
uint8_t *test_read_whole_file(const char *path, size_t *n);
/* The size of the file path. */
uint64_t test_file_size(const char *path);

/* A fresh directory for each test: test_dir_make as a checked fixture's
 * setup, test_dir_remove as its teardown (it removes whatever the test
 * left inside). test_dir holds its path while a test runs. */
#define TEST_PATH_MAX 256
extern char test_dir[];
void test_dir_make(void);
void test_dir_remove(void);
/* test_dir/name in out. */
const char *test_path(const char *name, char out[TEST_PATH_MAX]);

/* Every float dtype the archive supports. */
#define N_TEST_FLOAT_DTYPES 6
extern const unsigned test_float_dtypes[N_TEST_FLOAT_DTYPES];
/* Stores the low size bytes of v at p, little-endian: an element's bits. */
void test_put_elem(uint8_t *p, unsigned size, uint64_t v);

/* A tensor of a safetensors file a test writes. */
typedef struct {
    const char *name;
    const char *dtype;
    const char *shape; /* JSON array */
    const void *data;
    size_t len;
} test_tensor;
/* Writes the start of a safetensors file of the n tensors to f: its
 * header's length and the header; the tensors' data, in order, is the
 * caller's to write (t[i].data is not read). */
void test_write_safetensors_header(FILE *f, const test_tensor *t, size_t n);
/* Writes a safetensors file of the n tensors, in data order. */
void test_write_safetensors(const char *path, const test_tensor *t, size_t n);

/* A writer of the archive at path (created when create) with chunks of
 * 2^chunk_shift elements, the threads and max_chain given; fails the test
 * when it cannot open. */
/* The format version test_open_writer creates archives in (0: the
 * default): tests of both loop over them. */
extern unsigned test_format_version;
tf_writer *test_open_writer(const char *archive, bool create, unsigned chunk_shift,
                            unsigned threads, unsigned max_chain);
/* Adds the file src as dest; fails the test when that fails. */
void test_add(tf_writer *w, const char *src, const char *dest);
/* The record of blob slot idx; fails the test when it cannot be read. */
tf_blob test_blob(const tf_archive *ar, uint64_t idx);

/* Runs every test of s; returns main's exit status. */
/* An archive file in memory for catalog pages: a 32-byte superblock of
 * zeros, then what the sink appends; the source checks hashes as
 * tf_container_pread_checked does. */
typedef struct {
    tf_buf bytes;
    size_t appends;
    tf_page_source src;
    tf_page_sink sink;
} test_page_file;
void test_page_file_init(test_page_file *f);
void test_page_file_free(test_page_file *f);

int run_suite(Suite *s);

#endif
