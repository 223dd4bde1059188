/* trajpack push: the commits of a local archive that a copy of it in
 * object storage (s3://) lacks, uploaded, so that a trainer writes to
 * local disk and the bucket follows. The copy holds the same bytes as
 * the local archive up to its last commit: a push appends the local
 * bytes after it, whole commits grouped into segments of about
 * PUSH_SEGMENT bytes (io/segments.h), each published by the copy's
 * single writer (io/s3_writer.h): a push killed part of the way leaves
 * the copy at its last published segment, and the next one goes on from
 * there. A copy that is not the start of the local archive (another
 * writer's commits, or a local archive rewritten by gc) is refused. */
#ifndef TRAJFS_STORE_PUSH_H
#define TRAJFS_STORE_PUSH_H

#include <stdint.h>

#include "common/error.h"
#include "format/container.h"

typedef struct tf_pusher tf_pusher;

/* Opens the copy at url for writing, creating it (empty) where there is
 * none. */
int tf_pusher_open(const char *url, const tf_remote_opts *remote, tf_pusher **out, tf_error *e);
void tf_pusher_close(tf_pusher *p);

/* Uploads the commits of the archive at local (as it is now) that the
 * copy lacks: *commits and *bytes uploaded (0: it was up to date).
 * progress (NULL: none) is called with the bytes of each segment
 * published. */
int tf_pusher_push(tf_pusher *p, const char *local, uint64_t *commits, uint64_t *bytes,
                   void (*progress)(void *arg, uint64_t bytes), void *arg, tf_error *e);

#endif
