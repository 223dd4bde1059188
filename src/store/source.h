/* The bytes of a regular file being added: read into memory, or mapped
 * (a mount's spool file, which nothing else writes while it is added). */
#ifndef TRAJFS_STORE_SOURCE_H
#define TRAJFS_STORE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct {
    const char *name; /* for messages */
    int fd;
    uint64_t size;
    bool map;         /* map it rather than read it into memory */
    uint8_t *data;    /* once loaded: size bytes */
} tf_source;

/* Loads the whole file into src->data. */
int tf_source_load(tf_source *src, tf_error *e);
void tf_source_unload(tf_source *src);

#endif
