/* Checks of a stored file against its own bytes. */
#ifndef TRAJFS_STORE_ENTRY_CHECK_H
#define TRAJFS_STORE_ENTRY_CHECK_H

#include "common/error.h"
#include "format/catalog.h"
#include "store/reader.h"

/* Whether a tensor file's stored layout is what its bytes say: its
 * verbatim bytes, parsed again by its format, give the same pieces,
 * dtypes and names. Opening checks pieces against chunks, not against
 * the bytes (that would parse every file); a catalog pairing a header
 * with other tensors reads back as a file whose header lies, so
 * `trajpack verify` checks this. 0 (also for a format this release does
 * not know), or -1 naming the first difference. */
int tf_reader_check_layout(tf_reader_ctx *r, const tf_entry *ent, tf_error *e);

/* Why an opaque file that a tensor-file format recognises by its first
 * bytes is not stored per tensor: 1 with the reason in *why (the
 * format's complaint, e.g. a compressed torch.save entry), or 0 when no
 * format recognises it. For `trajpack stats`. */
int tf_reader_why_opaque(tf_reader_ctx *r, const tf_entry *ent, tf_error *why);

#endif
