/* An archive that trajfs writes to object storage (s3://BUCKET/KEY): S3
 * has no append, so the archive's bytes are a sequence of immutable
 * objects, its segments, each holding the bytes of one or more whole
 * commits, under KEY/:
 *
 *     KEY/GGGGGGGG-SSSSSSSSSSSSSSSS
 *
 * G the generation and S the offset of the segment's first byte in the
 * archive, each in hex and inverted (all bits flipped), so that a
 * listing, which S3 gives in key order, begins with the newest segment
 * of the newest generation: opening, and a follower's poll, are one
 * listing request; an older segment is listed only when a read reaches
 * it (pages of 1,000, each going further back). The first segment
 * (offset 0) starts with the superblock. A segment's size is its
 * object's; they join up, or the archive is damaged (EIO). Objects
 * under KEY/ of other names are not segments. Only the newest
 * generation is read: each is a whole archive, which trajpack gc writes
 * anew (store/regenerate.h). An empty object where a generation's next
 * segment would go is its seal: no commit can follow (a gc is writing
 * the next generation from this one); readers read the generation
 * without it. A generation newer than the one opened makes polls fail:
 * a reader keeps the archive it opened.
 *
 * The functions below read the segments as one object's bytes, as
 * io/http.h reads an object (io/remote.c uses either): the identity is
 * the archive's size and its newest segment's ETag. Thread-safe. */
#ifndef TRAJFS_IO_SEGMENTS_H
#define TRAJFS_IO_SEGMENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "io/http.h"
#include "io/s3.h"

typedef struct tf_segments tf_segments;

/* The key of the segment at `start` of generation `gen` of the archive
 * at `archive_key`, malloc'd; NULL when out of memory. */
char *tf_segments_key(const char *archive_key, uint32_t gen, uint64_t start);
/* The prefix of every segment's key: "KEY/", malloc'd. */
char *tf_segments_prefix(const char *archive_key);
/* Whether key, under prefix, names a segment: its generation and start. */
bool tf_segments_parse(const char *prefix, const char *key, uint32_t *gen, uint64_t *start);

/* Lists the newest segments of the archive that req names (one
 * request): *out NULL (and 0) when there are none (no archive written
 * in segments there). h and req are borrowed until tf_segments_free. */
int tf_segments_open(tf_http *h, const tf_s3_request *req, tf_segments **out, tf_error *e);
void tf_segments_free(tf_segments *s);
/* The generation read, and whether it is sealed (as opened or last
 * polled). */
uint32_t tf_segments_generation(tf_segments *s);
bool tf_segments_sealed(tf_segments *s);

/* As tf_http_probe, tf_http_identity_get, tf_http_adopt and
 * tf_http_fetch_as (the identity's size is the archive's, which the
 * listing told); the ranges' parts, of one segment each, are fetched
 * at once. */
int tf_segments_probe(tf_segments *s, tf_http_identity *now, tf_error *e);
void tf_segments_identity(tf_segments *s, tf_http_identity *id);
void tf_segments_adopt(tf_segments *s, const tf_http_identity *id);
int tf_segments_fetch_as(tf_segments *s, const tf_http_identity *id, tf_http_range *r, size_t n,
                         tf_error *e);

#endif
