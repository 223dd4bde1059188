/* What a writer of format version 2 asks of the blob records where it
 * holds no blob table (docs/CATALOG.md, The writer's open), answered
 * from the pages:
 * - the content ids it deduplicates new chunks against: the chunks, and
 *   their models, of the live files the last TF_VIEW_COMMITS commits
 *   wrote, of the references it encodes against, and of the commits it
 *   made itself; every one belongs to a live file, so none was given
 *   back;
 * - the longest chain of deltas ending at each keyframe a reference
 *   made, which bounds its redirects: from the records written since
 *   (pages are appended, a node after its children) and the count a
 *   redirect keeps in its record.
 * Whatever needs every record (a commit that drops files) loads the
 * table instead (archive_need_table), and so does a count that crosses a
 * redirect of an earlier writer, which kept none. */
#ifndef TRAJFS_STORE_WRITER_VIEW_H
#define TRAJFS_STORE_WRITER_VIEW_H

#include <stdint.h>

#include "common/error.h"
#include "common/hash.h"
#include "format/catalog.h"
#include "store/archive.h"

#define TF_VIEW_COMMITS 4

typedef struct writer_view writer_view;

/* A view of the archive whose end is `end` now. */
writer_view *writer_view_new(uint64_t end);
void writer_view_free(writer_view *v);

/* tf_archive_find_blob's answer: a slot that holds id, or -1. Safe from
 * several threads at once (the encoders), while the archive does not
 * change. */
int64_t writer_view_find(const tf_archive *ar, const tf_blob_id *id);
/* The reference ent joins the lookups, and the chain counts of the
 * keyframes its commit made are computed: 0; 1 when they cannot be (a
 * redirect of an earlier writer kept no count), for the caller to load
 * the table; -1 on error. */
int writer_view_use(tf_archive *ar, const tf_entry *ent, tf_error *e);
/* The count computed for slot; UINT_MAX when none was (no redirect of
 * it then). */
unsigned writer_view_above(const tf_archive *ar, uint64_t slot);
/* seg, applied: its blobs join the lookups, and the counts go (the
 * next file computes its own). */
int writer_view_applied(tf_archive *ar, const tf_segment *seg, tf_error *e);

#endif
