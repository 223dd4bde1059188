/* The bytes of a regular file being added, read where and when they are
 * needed (a format's header, a chunk at a time): encoding never holds
 * the whole file, whatever its size. */
#ifndef TRAJFS_STORE_SOURCE_H
#define TRAJFS_STORE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"
#include "format/tensor_format.h"

/* A regular file still being written (a mount's file, spooled as it
 * comes), to be encoded while it grows. Its callbacks may be called from
 * any of the writer's threads. */
typedef struct tf_growing_file {
    int fd;
    /* Blocks until the file holds at least end bytes: 0, or -1 when it
     * will not as it is being written (ECANCELED: it is to be added once
     * complete instead). */
    int (*await)(void *arg, uint64_t end, tf_error *e);
    /* Blocks until the file is complete: 0 when it is then size bytes,
     * none of which changed after they were read, with its final
     * permission bits and time in *mode and *mtime; else -1, as await.
     * After a 0 it does not change until the add returns. */
    int (*settle)(void *arg, uint64_t size, uint32_t *mode, struct timespec *mtime,
                  tf_error *e);
    /* Called once after a settle that returned 0, when the add is over:
     * the file may change again; added: whether it is in the archive. */
    void (*release)(void *arg, bool added);
    void *arg;
} tf_growing_file;

typedef struct {
    const char *name; /* for messages */
    int fd;
    uint64_t size;    /* as the file was when it was opened (growing: as
                       * it will be) */
    const tf_growing_file *growing; /* NULL: the file is complete */
} tf_source;

/* Reads exactly len bytes at off into out, waiting for them in a growing
 * file; a file that has shrunk since is an error. */
int tf_source_read(const tf_source *src, uint64_t off, void *out, size_t len, tf_error *e);

/* The source as a format parser reads it. */
tf_file_source tf_source_as_file(const tf_source *src);

#endif
