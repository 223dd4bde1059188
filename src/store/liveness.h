/* Which blob slots an archive's live files still need: those their
 * chunks name, and, from there, the references and models decoding them
 * reads (redirects applied). A slot no live file needs is dead: no
 * committed state from now on reads its payload, so a writer may give
 * the space back, and must no longer store new content as that slot. */
#ifndef TRAJFS_STORE_LIVENESS_H
#define TRAJFS_STORE_LIVENESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "store/archive.h"

enum {
    TF_LIVE_CHUNK = 1,  /* a live file names the slot as one of its chunks */
    TF_LIVE_NEEDED = 2, /* reading a live file decodes it (every chunk's slot,
                           their reference chains and models) */
};

/* A malloc'd array of one TF_LIVE_* byte per blob slot, or NULL (ENOMEM
 * in e). dropped, when not NULL, has a flag per entry (archive order):
 * the entries counted as removed (what a prune would leave). */
uint8_t *tf_liveness(const tf_archive *ar, const bool *dropped, tf_error *e);

/* Marks in live what reading ent needs (TF_LIVE_NEEDED): a version of a
 * file that readers still have open, not a live file's. Returns 1 when
 * that needed a slot that live did not, 0 when not, -1 with the reason
 * when a blob's record could not be read (live is then partly marked:
 * nothing may be given back by it). */
int tf_liveness_keep(const tf_archive *ar, uint8_t *live, const tf_entry *ent, tf_error *e);

/* The payload bytes that the slots with TF_LIVE_NEEDED in live are
 * served by, each payload counted once, in *bytes. 0, or -1 with the
 * reason. */
int tf_liveness_payload_bytes(const tf_archive *ar, const uint8_t *live, uint64_t *bytes,
                              tf_error *e);

/* The payloads of the slots needed in `before` (a liveness of this
 * archive before its last commits, of nbefore slots) and not in `now`,
 * and that no needed slot is served by: what those commits left for no
 * one to read, sorted by offset. A malloc'd array in *out (*n of them),
 * or -1 (ENOMEM). */
int tf_liveness_died(const tf_archive *ar, const uint8_t *before, uint64_t nbefore,
                     const uint8_t *now, tf_archive_range **out, size_t *n, tf_error *e);

#endif
