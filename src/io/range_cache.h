/* A disk cache of byte ranges fetched from remote objects, kept across
 * mounts and shared by processes: one file per range under
 * DIR/OBJECT/, OBJECT naming the object (its URL). Which version of the
 * object the entries are of is the anchor's to tell (the caller's: see
 * io/remote.c): the end of a commit and the bytes before it, which an
 * object that only grew by appends still holds there. Each entry carries the XXH3-64 of its bytes, checked
 * on every hit: a damaged entry is removed and reported missing, never
 * served. Files appear by rename, whole; the entries of all objects
 * together are kept under a byte bound, the least recently used removed
 * first. Every operation is best effort: a cache that cannot be written
 * only costs fetches.
 * The cache is trusted (its checksums catch damage, not forgery), so it
 * is its user's alone: DIR and each object's directory must belong to
 * the user, be writable by no one else and not be links, or opening
 * fails. Only the names the cache writes are read, counted and removed,
 * never through a link. */
#ifndef TRAJFS_IO_RANGE_CACHE_H
#define TRAJFS_IO_RANGE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct tf_range_cache tf_range_cache;

int tf_range_cache_open(const char *dir, const char *object, uint64_t max_bytes,
                        tf_range_cache **out, tf_error *e);
void tf_range_cache_close(tf_range_cache *c);

/* Copies [off, off + len) into buf from its entry, or from a segment
 * put with tf_range_cache_put_file that holds it: false when there is
 * none or it is damaged. */
bool tf_range_cache_get(tf_range_cache *c, uint64_t off, uint64_t len, void *buf);
/* Whether tf_range_cache_get would find [off, off + len) (unless it turns
 * out damaged): a segment holds it, or its entry is there, which the
 * page cache is then asked to start reading (a hint). */
bool tf_range_cache_will_need(tf_range_cache *c, uint64_t off, uint64_t len);
void tf_range_cache_put(tf_range_cache *c, uint64_t off, uint64_t len, const void *buf);
/* As tf_range_cache_put of the first len bytes of the file fd, copied
 * a piece at a time (a writer's segment, just published). */
void tf_range_cache_put_file(tf_range_cache *c, uint64_t off, uint64_t len, int fd);
/* Removes the entries that overlap [off, off + len). */
void tf_range_cache_drop(tf_range_cache *c, uint64_t off, uint64_t len);

/* The anchor: an offset `end` and the n (<= TF_RANGE_ANCHOR_MAX) bytes
 * before it; false when there is none (or it is damaged). */
#define TF_RANGE_ANCHOR_MAX 64
bool tf_range_cache_anchor_get(tf_range_cache *c, uint64_t *end, uint8_t *bytes, size_t *n);
void tf_range_cache_anchor_put(tf_range_cache *c, uint64_t end, const uint8_t *bytes, size_t n);

#endif
