#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_targets.h"
#include "store/archive.h"
#include "store/entry_check.h"
#include "store/reader.h"

#define CACHE_BYTES ((size_t)4 << 20)
#define PIECE ((size_t)64 << 10)          /* bytes per read, like a mount's */
#define READ_BUDGET ((uint64_t)16 << 20)  /* file bytes read per input */
#define MAX_RAW_BYTES ((uint64_t)8 << 24) /* no chunk is larger (as verify) */

static void broken(const char *what, const char *path)
{
    fprintf(stderr, "archive: %s \"%s\"\n", what, path);
    abort();
}

/* The input as a file: a memfd, reopened by path as the archive code
 * opens files. */
static const char *input_path(const uint8_t *data, size_t size, tf_error *e)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0 && (fd = memfd_create("fuzz.traj", 0)) >= 0)
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (fd < 0 || ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        tf_fail(e, errno, "memfd: %s", strerror(errno));
        return NULL;
    }
    return path;
}

/* Keeps the first error in *e and returns -1. */
static int note(tf_error *e, const tf_error *got)
{
    if (!e->msg[0])
        *e = *got;
    return -1;
}

/* Reads every blob. checked: the open checked every record (format 1,
 * or a full check of format 2), so each reads and its chain is within
 * the bound; otherwise (format 2) a record or a chain may fail, with an
 * error. */
static int read_blobs(tf_archive *ar, tf_reader_ctx *r, bool checked, tf_error *e)
{
    int rc = 0;
    uint64_t largest = 0;
    tf_blob b;
    tf_error got = { 0 };
    for (uint64_t i = 0; i < tf_archive_nblobs(ar); i++) {
        if (tf_archive_blob(ar, i, &b, &got) < 0) {
            if (checked)
                broken("a blob of the table cannot be read", got.msg);
            rc = note(e, &got);
        } else if (b.raw_len <= MAX_RAW_BYTES && b.raw_len > largest) {
            largest = b.raw_len;
        }
    }
    uint8_t *buf = malloc(largest ? largest : 1);
    if (!buf)
        return tf_fail(e, ENOMEM, "out of memory");
    for (uint64_t i = 0; i < tf_archive_nblobs(ar); i++) {
        if (checked && tf_archive_chain_depth(ar, i) > TF_CHAIN_MAX)
            broken("a reference chain is longer than the bound at blob", "");
        got = (tf_error){ 0 };
        if (tf_archive_blob(ar, i, &b, &got) == 0 && b.raw_len <= MAX_RAW_BYTES &&
            tf_reader_blob(r, i, buf, &got) < 0)
            rc = note(e, &got);
    }
    free(buf);
    return rc;
}

/* Reads a file piece by piece, as a mount does, within *budget bytes. */
static int read_file(tf_reader_ctx *r, const tf_entry *ent, uint8_t *piece, uint64_t *budget,
                     tf_error *e)
{
    for (uint64_t off = 0; off < ent->size && *budget; ) {
        size_t want = ent->size - off < PIECE ? (size_t)(ent->size - off) : PIECE;
        tf_error got = { 0 };
        ssize_t n = tf_reader_pread(r, ent, off, want, piece, &got);
        if (n < 0)
            return note(e, &got);
        if ((size_t)n != want)
            broken("short read inside", ent->path);
        off += want;
        *budget = *budget > want ? *budget - want : 0;
    }
    /* What `trajpack verify` does with a tensor file: parse its bytes again
     * and compare them with the stored layout (a mismatch is a clean error),
     * while the read budget lasts. */
    tf_error got = { 0 };
    if (tf_entry_is_tensor_file(ent) && *budget && tf_reader_check_layout(r, ent, &got) < 0)
        return note(e, &got);
    return 0;
}

static int read_files(tf_archive *ar, tf_reader_ctx *r, tf_error *e)
{
    uint8_t *piece = malloc(PIECE);
    if (!piece)
        return tf_fail(e, ENOMEM, "out of memory");
    uint64_t budget = READ_BUDGET;
    int rc = 0;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (tf_archive_lookup(ar, ent->path) != ent || tf_archive_subtree_len(ar, i) < 1)
            broken("the index does not find", ent->path);
        if (tf_entry_is_regular(ent) &&
            read_file(r, ent, piece, &budget, e) < 0)
            rc = -1;
    }
    free(piece);
    return rc;
}

/* Opens path as o says and reads everything. */
static int read_all(const char *path, const tf_open_opts *o, tf_error *e)
{
    tf_archive *ar;
    if (tf_archive_open(path, o, &ar, e) < 0)
        return -1;
    bool checked = tf_archive_format(ar) == TF_FORMAT_SEGMENTS || o->check_all;
    tf_reader_ctx *r = tf_reader_new(ar, CACHE_BYTES);
    int rc = r ? 0 : tf_fail(e, ENOMEM, "out of memory");
    if (r) {
        e->msg[0] = '\0';
        rc = read_blobs(ar, r, checked, e) | read_files(ar, r, e);
        tf_reader_free(r);
    }
    tf_archive_close(ar);
    return rc;
}

/* As a reader opens the archive, then as verify does (format 2 checks
 * every record only then). */
int tf_fuzz_read_archive(const char *path, tf_error *e)
{
    int rc = read_all(path, &(tf_open_opts){ .check_all = false }, e);
    tf_error full;
    return read_all(path, &(tf_open_opts){ .check_all = true }, &full) < 0 ? -1 : rc;
}

int tf_fuzz_archive(const uint8_t *data, size_t size, tf_error *e)
{
    const char *path = input_path(data, size, e);
    return path ? tf_fuzz_read_archive(path, e) : -1;
}
