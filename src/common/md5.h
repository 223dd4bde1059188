/* MD5 (RFC 1321), for what a protocol asks for by name (S3's
 * Content-MD5), never as a checksum of archive bytes: those are XXH3
 * (common/hash.h). */
#ifndef TRAJFS_COMMON_MD5_H
#define TRAJFS_COMMON_MD5_H

#include <stddef.h>
#include <stdint.h>

void tf_md5(const void *data, size_t len, uint8_t digest[16]);

#endif
