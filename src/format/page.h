/* Catalog pages of format version 2 (docs/CATALOG.md): each one zstd
 * frame that declares its decoded size, named from its parent by a page
 * reference (offset, stored length, XXH3-64 of the stored bytes). A
 * decoded page starts with an 8-byte header (kind, level, two reserved
 * zero bytes, record count), its records follow. Pages are immutable:
 * a commit writes new copies of those it changes. */
#ifndef TRAJFS_FORMAT_PAGE_H
#define TRAJFS_FORMAT_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

#define TF_PAGE_REF_SIZE 20
#define TF_PAGE_HEADER_SIZE 8
#define TF_PAGE_MAX ((size_t)64 << 10)
#define TF_PAGE_MAX_ENTRIES ((size_t)256 << 10) /* entry leaves */

typedef enum {
    TF_PAGE_ROOT = 1,
    TF_PAGE_BLOB_NODE = 2,
    TF_PAGE_BLOB_LEAF = 3,
    TF_PAGE_ENTRY_NODE = 4,
    TF_PAGE_ENTRY_LEAF = 5,
    TF_PAGE_BODY = 6,
    TF_PAGE_CHUNKS = 7,
    TF_PAGE_RETIRED = 8,
} tf_page_kind;

typedef struct {
    uint64_t off;  /* of the stored bytes in the archive file */
    uint32_t len;  /* stored bytes; 0: no page */
    uint64_t hash; /* XXH3-64 of the stored bytes */
} tf_page_ref;

/* Where pages are read from: exactly len bytes at off that must have
 * the XXH3-64 hash; 0, 1 when they do not (e untouched), -1 when they
 * cannot be read (tf_container_pread_checked's contract). size: the
 * bytes there are, so that no hostile length is allocated first. */
typedef struct {
    int (*read)(void *ctx, uint64_t off, void *buf, size_t len, uint64_t hash, tf_error *e);
    uint64_t (*size)(void *ctx);
    void *ctx;
} tf_page_source;

/* Where new pages go: appends len bytes, their offset in *off; and,
 * when not NULL, replaced is told each page that new ones replace, which
 * the new root no longer reaches (a writer gives its space back once the
 * commit is durable). */
typedef struct {
    int (*append)(void *ctx, const uint8_t *p, size_t len, uint64_t *off, tf_error *e);
    int (*replaced)(void *ctx, const tf_page_ref *old, tf_error *e);
    void *ctx;
} tf_page_sink;

/* A decoded page. */
typedef struct {
    uint8_t kind, level;
    uint32_t count;
    uint8_t *data;   /* malloc'd: the records, after the header */
    size_t len;      /* bytes at data */
} tf_page;

/* The largest decoded page of a kind, header included, for stored_len
 * stored bytes: a fixed bound, but for an entry's body, which may list
 * any number of chunks, 256 times its stored bytes (as segments). */
size_t tf_page_max(tf_page_kind kind, size_t stored_len);

void tf_page_ref_put(uint8_t *p, const tf_page_ref *r);
tf_page_ref tf_page_ref_get(const uint8_t *p);

/* A page decoded: the header, then len bytes of records, into out
 * (replacing what it held). A commit's root goes to the container so,
 * which compresses it. */
int tf_page_raw(tf_page_kind kind, unsigned level, uint32_t count, const void *records,
                size_t len, tf_buf *out, tf_error *e);
/* A page compressed: its stored bytes into out (replacing what it
 * held). */
int tf_page_encode(tf_page_kind kind, unsigned level, uint32_t count, const void *records,
                   size_t len, tf_buf *out, tf_error *e);
/* Encodes a page and appends it to sink; *ref names it. */
int tf_page_write(const tf_page_sink *sink, tf_page_kind kind, unsigned level, uint32_t count,
                  const void *records, size_t len, tf_page_ref *ref, tf_error *e);

/* Reads the page ref names, which must be of kind and level: its
 * checksum, frame, size and header checked. Memory is bounded by
 * tf_page_max, whatever the stored bytes say. */
int tf_page_read(const tf_page_source *src, const tf_page_ref *ref, tf_page_kind kind,
                 unsigned level, tf_page *pg, tf_error *e);
void tf_page_free(tf_page *pg);

#endif
