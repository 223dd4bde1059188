/* The entries of format version 2 (docs/CATALOG.md): leaves of entry
 * headers in the archive's path order, nodes naming leaves (or lower
 * nodes) by their first path, and a body page for each file. A header
 * holds what stat and readdir need (kind, inode, path, mode, mtime,
 * size; a symlink's target); a file's body page holds its whole entry
 * record as a catalog segment holds it (format/catalog.h). */
#ifndef TRAJFS_FORMAT_ENTRY_PAGES_H
#define TRAJFS_FORMAT_ENTRY_PAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "format/catalog.h"
#include "format/page.h"

/* Bytes of headers (or node records) a writer puts in one page: a page
 * may hold more (tf_page_max), up to one record past this. */
#define TF_ENTRY_PAGE_TARGET ((size_t)32 << 10)

/* Whether entries of this kind have a body page. */
static inline bool tf_entry_has_body(uint8_t kind)
{
    return kind == TF_ENTRY_FILE || kind == TF_ENTRY_TENSORS;
}

/* Path order in which a directory's subtree directly follows it:
 * bytewise, but with '/' below every other byte. */
int tf_path_cmp(const char *a, const char *b);

/* Appends the header of ent to a leaf's records; prev is the path of
 * the header before it in the leaf (NULL for the first), body the
 * reference of its body page (files only). */
int tf_entry_header_put(tf_buf *out, const tf_entry *ent, const char *prev,
                        const tf_page_ref *body, tf_error *e);

/* The headers of leaf pg, in order: each call gets an entry holding
 * the header's fields (its path malloc'd, the callee's to keep or free)
 * and, for a file, its body page's reference. */
typedef int (*tf_entry_header_fn)(void *arg, tf_entry *ent, const tf_page_ref *body,
                                  tf_error *e);
int tf_entry_leaf_parse(const tf_page *pg, tf_entry_header_fn fn, void *arg, tf_error *e);

/* A node's child: a leaf's or a lower node's page, and the first path
 * under it. */
typedef struct {
    tf_page_ref ref;
    char *first; /* malloc'd */
} tf_entry_child;

int tf_entry_node_put(tf_buf *out, const tf_entry_child *child, tf_error *e);
/* The children of node pg, in a malloc'd array (each first path
 * malloc'd too): strictly in path order. */
int tf_entry_node_parse(const tf_page *pg, tf_entry_child **out, size_t *n, tf_error *e);
void tf_entry_children_free(tf_entry_child *c, size_t n);

/* Writes ent's body page; *ref names it. */
int tf_entry_body_write(const tf_page_sink *sink, const tf_entry *ent, tf_page_ref *ref,
                        tf_error *e);
/* Reads the body page ref names into *ent, which holds the header read
 * for it (its path and header fields stay as they are): the body must
 * repeat them. Its chunks must name blobs below nblobs. */
int tf_entry_body_read(const tf_page_source *src, const tf_page_ref *ref, uint64_t nblobs,
                       unsigned chunk_shift, tf_entry *ent, tf_error *e);

#endif
