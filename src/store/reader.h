/* Reconstructing bytes: a blob by walking its reference chain, a byte
 * range of a file by mapping it onto its pieces: verbatim bytes and
 * tensor chunks. */
#ifndef TRAJFS_STORE_READER_H
#define TRAJFS_STORE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/error.h"
#include "format/catalog.h"
#include "store/archive.h"

typedef struct tf_reader_ctx tf_reader_ctx;

/* A reader keeps an LRU cache of reconstructed blobs bounded by
 * cache_bytes (at least two chunks of the widest dtype), so reading a
 * trajectory in step order decodes each chunk once. Any number of threads
 * may use one reader at once: they share its cache, and threads that need
 * the same blob at the same time decode it once. */
tf_reader_ctx *tf_reader_new(tf_archive *ar, size_t cache_bytes);
void tf_reader_free(tf_reader_ctx *r);
/* Bounds r's cache by cache_bytes from now on (with the floor of
 * tf_reader_new). */
void tf_reader_set_cache_bound(tf_reader_ctx *r, size_t cache_bytes);
/* The bound of r's cache now, in bytes. */
size_t tf_reader_cache_bound(const tf_reader_ctx *r);
/* The archive r reads. */
tf_archive *tf_reader_archive(const tf_reader_ctx *r);

/* Work done so far, for statistics and tests. */
typedef struct {
    uint64_t decoded;       /* blobs decoded */
    uint64_t decoded_bytes; /* their reconstructed bytes */
    uint64_t hits;          /* blobs asked for and found in the cache */
} tf_reader_counts;
tf_reader_counts tf_reader_get_counts(const tf_reader_ctx *r);

/* Reconstructs blob idx into out (its raw_len bytes): checks the payload
 * checksum, decodes against its reference (reconstructed first), and
 * checks the id of the result. */
int tf_reader_blob(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e);

/* Reconstructs blob idx into the cache unless it is there or being
 * reconstructed: what a prefetcher does ahead of reads. A failure is
 * left for the read that needs the blob to report. */
void tf_reader_warm(tf_reader_ctx *r, uint64_t idx);

/* Asks the kernel for the stored bytes the n blobs idx[] need and the
 * cache does not hold: their payloads and models, and those of their
 * reference chains down to a cached blob, in one batch of hints
 * (tf_blob_hints_send). Indices out of range (damage, which the read
 * reports) are skipped. Returns at once. */
void tf_reader_will_need(tf_reader_ctx *r, const uint64_t *idx, size_t n);

/* tf_reader_blob for a blob wanted once (a writer's reference chunk): a
 * cached copy serves, but one decoded here is not kept. */
int tf_reader_blob_once(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e);

/* Puts the bytes of blob idx, known to the caller (a writer that has
 * just stored them), into the cache as if they had been decoded, so that
 * the next checkpoint's deltas find their reference without decoding.
 * data, a malloc'd block of the blob's raw_len bytes, goes to the cache
 * without a copy: the reader frees it (at once, when the blob is cached
 * already). */
void tf_reader_seed_owned(tf_reader_ctx *r, uint64_t idx, uint8_t *data);

/* Reads up to len bytes of a file entry at off into out. Returns the
 * number of bytes read (short only at end of file), or -1. For a tensor
 * file, error messages name the tensor. */
ssize_t tf_reader_pread(tf_reader_ctx *r, const tf_entry *ent, uint64_t off,
                        size_t len, uint8_t *out, tf_error *e);

/* A read's bytes where they lie, for a reply without copying them:
 * spans of cached blobs, held until tf_reader_release_spans, and of the
 * entry's own bytes (valid while the entry is). Its arrays are kept
 * between reads; tf_read_spans_free frees them. */
#define TF_READ_SPANS_MAX 1000 /* spans; below writev's IOV_MAX of 1024 */
typedef struct {
    struct iovec *iov;
    size_t n, iov_cap;
    struct tf_cache_item **held;
    size_t nheld, held_cap;
} tf_read_spans;

/* tf_reader_pread into spans instead of a buffer: 0 spans when nothing
 * is read. On failure nothing is held; a read of more than
 * TF_READ_SPANS_MAX spans fails with E2BIG (tf_reader_pread copies it). */
ssize_t tf_reader_pread_spans(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                              tf_read_spans *v, tf_error *e);
void tf_reader_release_spans(tf_reader_ctx *r, tf_read_spans *v);
void tf_read_spans_free(tf_read_spans *v);

#endif
