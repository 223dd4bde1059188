/* Byte counts as people write them in options. */
#ifndef TRAJFS_COMMON_SIZE_ARG_H
#define TRAJFS_COMMON_SIZE_ARG_H

#include <stddef.h>

/* Parses a byte count with an optional binary suffix K, M, G or T
 * (case-insensitive; an optional "B" or "iB" may follow). 0 or -1. */
int tf_parse_size(const char *s, size_t *out);

#endif
