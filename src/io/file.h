/* A local file as the bytes of an archive (io/io.h): read with pread,
 * appended with pwrite, made durable with fdatasync, locked with flock. */
#ifndef TRAJFS_IO_FILE_H
#define TRAJFS_IO_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "io/io.h"

/* Opens path, a regular file, for reading (and appending, when
 * writable). */
int tf_file_open(const char *path, bool writable, tf_io **out, tf_error *e);
/* Creates path holding the len bytes (io/io.h: tf_io_create). */
int tf_file_create(const char *path, const void *bytes, size_t len, tf_error *e);

#endif
