/* An archive's catalog in pages (format version 2, docs/CATALOG.md):
 * the root of its last commit, the blob tree, the entry pages. An open
 * reads the root and every entry (headers and bodies); blob records are
 * read when looked up. A writer stages a commit's pages here, writes
 * them through the container, and passes the root's stored bytes to
 * tf_container_commit as the commit's catalog. */
#ifndef TRAJFS_FORMAT_PAGED_H
#define TRAJFS_FORMAT_PAGED_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "format/blob_tree.h"
#include "format/catalog.h"
#include "format/container.h"
#include "format/root.h"

typedef struct tf_paged tf_paged;

/* The catalog of c's last commit (c->has_commit; an empty one
 * otherwise), its blob pages cached up to cache_bytes; its entries in a
 * malloc'd array in path order (*entries, *n, each the caller's). lazy:
 * the entries are their headers, their bodies pending (tf_paged_body);
 * otherwise whole. */
int tf_paged_open(tf_container *c, size_t cache_bytes, bool lazy, tf_paged **out,
                  tf_entry **entries, size_t *n, tf_error *e);
/* Reads the body of ent, pending, into it. */
int tf_paged_body(tf_paged *p, tf_entry *ent, tf_error *e);
void tf_paged_free(tf_paged *p);

/* The last commit's root (seq 0: no commit). */
const tf_root *tf_paged_root(const tf_paged *p);
/* Blob record idx (< the root's count) and its marks (may be NULL). */
int tf_paged_blob(tf_paged *p, uint64_t idx, tf_blob *b, tf_blob_marks *marks, tf_error *e);
/* Calls fn with every blob record, in slot order, checked as
 * tf_paged_blob checks one (a full load: its pages are not cached). */
int tf_paged_scan(tf_paged *p, tf_blob_record_fn fn, void *arg, tf_error *e);
/* The same for the records of the blob tree's leaves stored at offset
 * `since` or after (tf_blob_tree_scan_since), each checked. */
int tf_paged_scan_since(tf_paged *p, uint64_t since, tf_blob_record_fn fn, void *arg,
                        tf_error *e);
/* The ranges the last commit retired (the payloads its redirects
 * retired, the pages it replaced), as (offset, length) pairs in a
 * malloc'd array (*n pairs; NULL and 0 for none). */
int tf_paged_retired(tf_paged *p, uint64_t **pairs, size_t *n, tf_error *e);

/* Calls fn with the offset and length of each page the last commit's
 * catalog reaches (the blob tree, the entries' nodes and leaves, the
 * retired list; not the bodies, which its entries name), until fn
 * fails: what a writer must not give back. */
int tf_paged_pages(tf_paged *p, int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e),
                   void *arg, tf_error *e);

/* Reads the commit whose trailer is t, newer than the last, staged:
 * its entries in *entries as tf_paged_open's; tf_paged_done then makes
 * it the last (readers of its blobs held off meanwhile), or
 * tf_paged_undo drops it. `have` holds the last commit's nhave entries:
 * those of the leaves it kept are copied from there (tf_entry_clone),
 * not read again. */
int tf_paged_follow(tf_paged *p, const tf_trailer *t, const tf_entry *have, size_t nhave,
                    tf_entry **entries, size_t *n, tf_error *e);

/* ---- a writer's commit ---- */

/* Writes the body pages of the n entries that have one (setting their
 * `body`). */
int tf_paged_write_bodies(tf_paged *p, tf_entry *ents, size_t n, tf_error *e);
/* Stages record slot (<= the count: the count appends). */
int tf_paged_stage_blob(tf_paged *p, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                        tf_error *e);
/* Stages the flag TF_BLOB_MODEL on record slot. */
int tf_paged_stage_model(tf_paged *p, uint64_t slot, tf_error *e);

/* What a commit changes besides its blobs. */
typedef struct {
    const tf_entry *before; /* the entries before the commit, in path order */
    size_t nbefore;
    const tf_entry *after;  /* after it: an unchanged entry has the same path
                               pointer as before */
    size_t nafter;
    const uint64_t *retired; /* (offset, length) pairs its redirects retired */
    size_t nretired;
    uint64_t next_ino;
    uint64_t first_blob; /* its first new blob */
} tf_paged_change;

/* Writes the commit's pages (the staged blobs, the entry leaves that
 * changed, the nodes, the retired list) and encodes its root into
 * root_out, for tf_container_commit. Then tf_paged_done or
 * tf_paged_undo. */
int tf_paged_stage(tf_paged *p, const tf_paged_change *ch, tf_buf *root_out, tf_error *e);
/* The pages the commit staged replaces, as (offset, length) pairs
 * (valid until the next stage). */
void tf_paged_replaced(const tf_paged *p, const uint64_t **pairs, size_t *n);
/* The commit staged (made, or followed) is the last now. */
void tf_paged_done(tf_paged *p);
/* The commit staged failed: the catalog is the last commit's again. */
void tf_paged_undo(tf_paged *p);

#endif
