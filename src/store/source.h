/* The bytes of a regular file being added, read where and when they are
 * needed (a format's header, a chunk at a time): encoding never holds
 * the whole file, whatever its size. */
#ifndef TRAJFS_STORE_SOURCE_H
#define TRAJFS_STORE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "format/tensor_format.h"

typedef struct {
    const char *name; /* for messages */
    int fd;
    uint64_t size;    /* as the file was when it was opened */
} tf_source;

/* Reads exactly len bytes at off into out; a file that has shrunk
 * since is an error. */
int tf_source_read(const tf_source *src, uint64_t off, void *out, size_t len, tf_error *e);

/* The source as a format parser reads it. */
tf_file_source tf_source_as_file(const tf_source *src);

#endif
