/* Checksums and content ids (xxHash). A blob id is XXH3-128 of the bytes a
 * blob reconstructs; every stored payload carries XXH3-64 of its bytes. */
#ifndef TRAJFS_COMMON_HASH_H
#define TRAJFS_COMMON_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t b[16]; /* XXH3-128 in canonical (big-endian) byte order */
} tf_blob_id;

tf_blob_id tf_blob_id_of(const void *data, size_t len);
uint64_t tf_hash64(const void *data, size_t len);
/* tf_hash64 of the len bytes at off of the file fd, read a piece at a
 * time (memory bounded whatever len), and written on the way to the file
 * copy_to at its position unless copy_to is -1: false when they cannot
 * all be read (or written). */
bool tf_hash64_file(int fd, uint64_t off, uint64_t len, int copy_to, uint64_t *out);
bool tf_blob_id_eq(const tf_blob_id *a, const tf_blob_id *b);
/* 32 lowercase hex digits and a NUL. */
void tf_blob_id_hex(const tf_blob_id *id, char out[33]);

#endif
