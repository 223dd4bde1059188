/* Reading the directory of a zip archive (the container of torch.save
 * files): where each entry's bytes lie, never decompressing anything.
 * Every offset and size is checked against the file: an entry whose
 * local header or data lies outside it, a central directory that does
 * not fit or lies about its count, zip64 records that lie, are errors
 * (EINVAL, with the reason), and nothing is allocated beyond the size of
 * the central directory the file holds. */
#ifndef TRAJFS_FORMAT_ZIP_H
#define TRAJFS_FORMAT_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "format/tensor_format.h"

typedef struct {
    char *name;        /* from the central directory, NUL-free */
    uint16_t method;   /* 0: stored */
    uint64_t data_off; /* first byte of its stored data in the file */
    uint64_t size;     /* stored bytes */
    uint64_t raw_size; /* bytes once decompressed (= size when stored) */
} tf_zip_entry;

typedef struct {
    size_t n;
    tf_zip_entry *v; /* sorted by name */
} tf_zip;

/* Reads the end-of-central-directory record (zip64 too), the central
 * directory and each entry's local header. 0, or -1 (EINVAL when the
 * file is not a valid zip archive, or the reader's error). */
int tf_zip_read(const tf_file_source *src, tf_zip *z, tf_error *e);
void tf_zip_free(tf_zip *z);

/* The entry with this name, or NULL. */
const tf_zip_entry *tf_zip_find(const tf_zip *z, const char *name);

#endif
