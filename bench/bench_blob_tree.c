/* What the paged blob table (format/blob_tree.h) writes a commit and
 * what a lookup costs, on a series of checkpoints shaped like a run's:
 * each commit appends CHUNKS records (deltas against the same chunk of
 * the commit before) and rewrites the CHUNKS records of the commit
 * before (their keyframes re-encoded as deltas: redirects).
 *
 *   bench/bench_blob_tree COMMITS CHUNKS
 *
 * Prints the stored bytes and pages of the last commits, the bytes of
 * all the pages reachable, and lookups per second cold (a fresh tree a
 * pass) and warm. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "format/blob_tree.h"

/* The pages go to an unlinked temporary file, read back with pread. */
typedef struct {
    int fd;
    uint64_t size;
    size_t appends;
} page_file;

static int file_read(void *ctx, uint64_t off, void *buf, size_t len, uint64_t hash, tf_error *e)
{
    const page_file *f = ctx;
    if (pread(f->fd, buf, len, (off_t)off) != (ssize_t)len)
        return tf_fail(e, EIO, "short read at %llu", (unsigned long long)off);
    return tf_hash64(buf, len) != hash;
}

static uint64_t file_size(void *ctx)
{
    return ((const page_file *)ctx)->size;
}

static int file_append(void *ctx, const uint8_t *p, size_t len, uint64_t *off, tf_error *e)
{
    page_file *f = ctx;
    if (pwrite(f->fd, p, len, (off_t)f->size) != (ssize_t)len)
        return tf_fail(e, errno, "write: %s", strerror(errno));
    *off = f->size;
    f->size += len;
    f->appends++;
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A record as a writer makes them: a random id and checksum, payloads
 * one after another, a delta against the slot `ref` (0: a keyframe). */
static tf_blob record(uint64_t slot, uint64_t ref, uint64_t *payload_end)
{
    tf_blob b = { .enc_len = 300 + (slot * 7919) % 400, .raw_len = 2048, .codec = ref ? 5 : 3,
                  .dtype = 2, .ref = ref };
    b.offset = *payload_end;
    *payload_end += b.enc_len;
    b.id = tf_blob_id_of(&slot, sizeof slot);
    uint64_t salt = slot ^ 0x5bd1e995u;
    b.enc_hash = tf_hash64(&salt, sizeof salt);
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_blob_tree COMMITS CHUNKS\n");
        return 2;
    }
    const uint64_t commits = strtoull(argv[1], NULL, 10), chunks = strtoull(argv[2], NULL, 10);
    char path[] = "/tmp/bench_blob_tree.XXXXXX";
    page_file f = { .fd = mkstemp(path), .size = 32 }; /* after a superblock's room */
    if (f.fd < 0) {
        perror("bench_blob_tree: mkstemp");
        return 1;
    }
    unlink(path);
    tf_page_source src = { file_read, file_size, &f };
    tf_page_sink sink = { file_append, NULL, &f };
    tf_blob_tree *t = tf_blob_tree_new(&src, NULL, 0, 64 << 20);
    tf_error e;
    tf_page_ref root = { 0 };
    uint64_t payload_end = 1u << 30, last_bytes = 0, last_pages = 0, tail = commits < 10 ? 1 : 10;
    for (uint64_t c = 0; c < commits; c++) {
        const uint64_t first = c * chunks;
        uint64_t bytes0 = f.size;
        size_t pages0 = f.appends;
        for (uint64_t i = 0; i < chunks; i++) {
            tf_blob b = record(first + i, 0, &payload_end);
            if (tf_blob_tree_set(t, first + i, &b, (tf_blob_marks){ 0, 0 }, &e) < 0)
                goto fail;
            if (c) { /* the previous keyframe, now a delta against this one */
                b = record(first + i - chunks, first + i + 1, &payload_end);
                if (tf_blob_tree_set(t, first + i - chunks, &b, (tf_blob_marks){ TF_BLOB_REDIRECTED, 1 }, &e) < 0)
                    goto fail;
            }
        }
        if (tf_blob_tree_write(t, &sink, &root, &e) < 0)
            goto fail;
        if (c >= commits - tail) {
            last_bytes += f.size - bytes0;
            last_pages += f.appends - pages0;
        }
    }
    const uint64_t n = commits * chunks;
    printf("%llu records, height %u\n", (unsigned long long)n, tf_blob_tree_height(n));
    printf("a commit of the last %llu: %.1f kB in %.1f pages (%.1f B a record changed)\n",
           (unsigned long long)tail, last_bytes / 1e3 / tail, (double)last_pages / tail,
           (double)last_bytes / tail / (commits > 1 ? 2.0 * chunks : chunks));
    printf("all pages written: %.1f MB\n", (f.size - 32) / 1e6);
    const uint64_t lookups = 200000;
    for (int warm = 0; warm < 2; warm++) {
        tf_blob_tree *r = tf_blob_tree_new(&src, &root, n, warm ? 64 << 20 : 1);
        uint64_t x = 12345;
        double t0 = now();
        for (uint64_t i = 0; i < lookups; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            tf_blob b;
            if (tf_blob_tree_get(r, (x >> 11) % n, &b, NULL, &e) < 0)
                goto fail;
        }
        printf("random lookups, %s: %.0f ns each\n", warm ? "64 MiB cache" : "a cache of 4 pages",
               (now() - t0) / lookups * 1e9);
        tf_blob_tree_free(r);
    }
    tf_blob_tree_free(t);
    close(f.fd);
    return 0;
fail:
    fprintf(stderr, "bench_blob_tree: %s\n", e.msg);
    return 1;
}
