/* trajpack gc, in place: what removals left behind is given back without
 * rewriting the archive. The chunks whose references only removed files
 * had are rebased (store/rebase.h), then every byte that no commit from
 * the newest on reads is punched (store/give_back.h): also what a writer
 * that died between a commit and its give-back, or a release before
 * this one, left. The bytes written are the rebased chunks and one
 * catalog segment. */
#ifndef TRAJFS_STORE_RECLAIM_H
#define TRAJFS_STORE_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "store/rebase.h"
#include "store/write_opts.h"

typedef struct {
    tf_rebase_stats rebase;
    uint64_t allocated_before, allocated_after; /* bytes the disk holds */
    uint64_t size;                              /* the archive file's */
} tf_reclaim_stats;

/* Reclaims the space of the archive at path (local) as its writer, with
 * opts (NULL: defaults) for the rebase's encoding; with rebase_only,
 * punches nothing (a rewrite follows, and an archive with nothing to
 * rebase is left byte for byte as it was). */
int tf_reclaim(const char *path, const tf_write_opts *opts, bool rebase_only,
               tf_reclaim_stats *st, tf_error *e);

#endif
