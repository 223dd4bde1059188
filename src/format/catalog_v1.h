/* Reading the safetensors entries of archives written by release 1. */
#ifndef TRAJFS_FORMAT_CATALOG_V1_H
#define TRAJFS_FORMAT_CATALOG_V1_H

#include "common/buf.h"
#include "common/error.h"
#include "format/catalog.h"

/* Reads the body of a TF_ENTRY_SAFETENSORS entry (after its path, mode
 * and mtime) into ent as a TF_ENTRY_TENSORS entry with inline
 * verbatim bytes; sets ent->nchunks to the number of chunk ids that
 * follow, which the caller reads. */
int tf_catalog_read_v1_safetensors(tf_cursor *r, unsigned chunk_shift, tf_entry *ent, tf_error *e);

#endif
