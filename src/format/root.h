/* The root page of a commit of format version 2 (docs/CATALOG.md): one
 * record of fixed size that names everything else the commit's catalog
 * holds. Its trailer names it; it is written last, right before the
 * trailer. */
#ifndef TRAJFS_FORMAT_ROOT_H
#define TRAJFS_FORMAT_ROOT_H

#include <stdint.h>

#include "common/error.h"
#include "format/page.h"

#define TF_ROOT_WINDOW 4      /* commits whose new blobs a writer deduplicates against */
#define TF_ROOT_RECORD_SIZE 144

typedef struct {
    uint64_t seq;           /* the commit's number, from 1 */
    uint64_t nblobs;        /* slots in the blob tree */
    uint64_t next_ino;      /* the next inode number to give (>= 2) */
    uint64_t nentries;      /* entries in the entries tree */
    tf_page_ref blobs;      /* the blob tree's root (len 0: no blobs) */
    tf_page_ref entries;    /* the entries tree's root (len 0: no entries) */
    uint8_t entries_height; /* levels above the entries tree's leaves */
    tf_page_ref retired;    /* payloads this commit's redirects retired (len 0: none) */
    uint64_t retired_bytes; /* payload bytes retired by every commit, in all */
    /* The first blob of each of the last TF_ROOT_WINDOW commits, this
     * one's last: blobs from window[0] on are the window. */
    uint64_t window[TF_ROOT_WINDOW];
} tf_root;

/* The root's page, decoded, into out: the catalog a commit gives
 * tf_container_commit, which compresses it. */
int tf_root_encode(const tf_root *r, tf_buf *out, tf_error *e);
/* Reads and checks the root ref names. */
int tf_root_read(const tf_page_source *src, const tf_page_ref *ref, tf_root *r, tf_error *e);

#endif
