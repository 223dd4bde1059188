/* A file held in memory as the tf_file_source of a tensor format
 * (format/tensor_format.h): what the unit tests and the fuzz targets
 * parse without writing a file. */
#ifndef TRAJFS_TESTS_COMMON_MEMORY_SOURCE_H
#define TRAJFS_TESTS_COMMON_MEMORY_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* A file held in memory, for tf_memory_read: a read past its end is
 * EINVAL (the file is shorter than it claims). */
typedef struct {
    const uint8_t *data;
    uint64_t size;
} tf_memory_file;

/* A tf_file_source read function over a tf_memory_file (its arg). */
int tf_memory_read(void *arg, uint64_t off, void *out, size_t len, tf_error *e);

#endif
