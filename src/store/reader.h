/* Reconstructing bytes: a blob by walking its reference chain, a byte
 * range of a file by mapping it onto header bytes and tensor chunks. */
#ifndef TRAJFS_STORE_READER_H
#define TRAJFS_STORE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "format/catalog.h"
#include "store/archive.h"

typedef struct tf_reader_ctx tf_reader_ctx;

/* A reader keeps an LRU cache of reconstructed blobs bounded by
 * cache_bytes (at least two chunks of the widest dtype), so reading a
 * trajectory in step order decodes each chunk once. Any number of threads
 * may use one reader at once (all functions but tf_reader_tensor_name):
 * they share its cache, and threads that need the same blob at the same
 * time decode it once. */
tf_reader_ctx *tf_reader_new(tf_archive *ar, size_t cache_bytes);
void tf_reader_free(tf_reader_ctx *r);

/* Work done so far, for statistics and tests. */
typedef struct {
    uint64_t decoded; /* blobs decoded */
    uint64_t hits;    /* blobs asked for and found in the cache */
} tf_reader_counts;
tf_reader_counts tf_reader_get_counts(const tf_reader_ctx *r);

/* Reconstructs blob idx into out (its raw_len bytes): checks the payload
 * checksum, decodes against its reference (reconstructed first), and
 * checks the id of the result. */
int tf_reader_blob(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e);

/* Reads up to len bytes of a file entry at off into out. Returns the
 * number of bytes read (short only at end of file), or -1. For a
 * safetensors entry, error messages name the tensor. */
ssize_t tf_reader_pread(tf_reader_ctx *r, const tf_entry *ent, uint64_t off,
                        size_t len, uint8_t *out, tf_error *e);

/* Whether a safetensors entry's stored header describes its stored
 * tensors: as many, in data order each of the dtype and byte size of its
 * span. Opening checks the spans against the chunks, not against the
 * header (that would parse every header); a catalog pairing a header
 * with other tensors reads back as a file whose header lies, so `trajpack
 * verify` checks this. 0, or -1 naming the first difference. */
int tf_reader_check_header(const tf_entry *ent, tf_error *e);

/* Name of the tensor with index t of a safetensors entry (parsed from the
 * stored header), for messages and statistics; NULL if unavailable. The
 * string is owned by the reader and valid until the next call. Not for
 * concurrent use. */
const char *tf_reader_tensor_name(tf_reader_ctx *r, const tf_entry *ent, uint64_t t);

#endif
