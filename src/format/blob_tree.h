/* The blob table of format version 2 (docs/CATALOG.md): a radix tree of
 * pages over the slot index. A leaf holds TF_BLOB_LEAF_RECORDS records of
 * TF_BLOB_RECORD_SIZE bytes; a node of level k holds up to
 * TF_BLOB_FANOUT references to nodes of level k - 1; the height follows
 * from the blob count. Lookups read pages through a cache of bounded
 * size; changes are staged in memory and written as new pages (copy on
 * write: the leaves changed and their parents up to a new root). */
#ifndef TRAJFS_FORMAT_BLOB_TREE_H
#define TRAJFS_FORMAT_BLOB_TREE_H

#include <stdint.h>

#include "common/error.h"
#include "format/catalog.h"
#include "format/page.h"

#define TF_BLOB_LEAF_RECORDS 64
#define TF_BLOB_RECORD_SIZE 68
#define TF_BLOB_FANOUT 128

/* A record's flags. */
enum {
    TF_BLOB_REDIRECTED = 1, /* the slot is served by a blob written after it */
    TF_BLOB_DEAD = 2,       /* no live file needs it: never deduplicated against */
    TF_BLOB_MODEL = 4,      /* some blob names it as its model */
};
#define TF_BLOB_FLAGS_KNOWN 7u

/* What a record says of its slot beside the blob that serves it. */
typedef struct {
    uint8_t flags; /* TF_BLOB_* */
    /* A slot a redirect wrote: 1 + the longest chain of deltas that
     * ended at it then (TF_BLOB_ABOVE_MANY: that or more); 0 where not
     * kept (other slots, and redirects of earlier writers). */
    uint8_t above;
} tf_blob_marks;
#define TF_BLOB_ABOVE_MANY 255

typedef struct tf_blob_tree tf_blob_tree;

/* A tree of nblobs records at root (len 0 when nblobs is 0), read from
 * src, its cache holding about cache_bytes of decoded pages. NULL: out
 * of memory. The root is read by the first lookup. */
tf_blob_tree *tf_blob_tree_new(const tf_page_source *src, const tf_page_ref *root,
                               uint64_t nblobs, size_t cache_bytes);
void tf_blob_tree_free(tf_blob_tree *t);

/* Records, the staged changes included. */
uint64_t tf_blob_tree_count(const tf_blob_tree *t);
/* The height of a tree of n records: 0 for one leaf (or none). */
unsigned tf_blob_tree_height(uint64_t n);

/* Record slot (< count) into *b and its marks into *marks (may be NULL).
 * Safe from several threads at once, but not while a change is staged
 * or written. */
int tf_blob_tree_get(tf_blob_tree *t, uint64_t slot, tf_blob *b, tf_blob_marks *marks,
                     tf_error *e);

typedef int (*tf_blob_record_fn)(void *arg, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                                 tf_error *e);
/* Calls fn with every record of the tree at its root, in slot order
 * (its leaves read once each, not kept in the cache), until fn fails. */
int tf_blob_tree_scan(tf_blob_tree *t, tf_blob_record_fn fn, void *arg, tf_error *e);
/* The same for the records of the leaves stored at offset `since` or
 * after: pages are appended, and a node after its children, so these are
 * the leaves under the nodes stored there, whatever commits wrote them
 * since. Those leaves are read through the cache: lookups want them
 * next. */
int tf_blob_tree_scan_since(tf_blob_tree *t, uint64_t since, tf_blob_record_fn fn, void *arg,
                            tf_error *e);

/* Stages record slot (<= count: count appends one). */
int tf_blob_tree_set(tf_blob_tree *t, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                     tf_error *e);

/* Writes the staged changes to sink as new pages; *root names the new
 * root. The tree then reads from there, the changes no longer staged.
 * On failure nothing is staged any more either: the tree reads its old
 * root (the caller cuts off what was appended). */
int tf_blob_tree_write(tf_blob_tree *t, const tf_page_sink *sink, tf_page_ref *root,
                       tf_error *e);
/* Calls fn with the offset and length of each page of the tree (its
 * nodes read through the cache), until fn fails. */
int tf_blob_tree_pages(tf_blob_tree *t,
                       int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e), void *arg,
                       tf_error *e);
/* Drops the staged changes. */
void tf_blob_tree_discard(tf_blob_tree *t);
/* Reads the tree of nblobs records at root from now on (a newer commit,
 * or the old one again), the staged changes dropped; the cache stays
 * (pages never change). */
void tf_blob_tree_reroot(tf_blob_tree *t, const tf_page_ref *root, uint64_t nblobs);

#endif
