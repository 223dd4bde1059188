/* trajpack gc of an archive in object storage (s3://): its segments
 * cannot be cut, so the archive is written anew as the next generation
 * (io/segments.h). The generation read is sealed first, so that no
 * commit can land in it that the new one would lack; its bytes are
 * copied to a local file, which tf_gc (store/gc.h) rewrites without the
 * data no file needs; that file is uploaded as the next generation,
 * whole, and the older generations' objects are deleted. A gc killed
 * part of the way leaves the sealed generation, which readers read as
 * before and writers refuse (they say why), and which the next gc
 * finishes. Readers that opened the old generation keep it: their reads
 * of bytes they do not hold fail once it is deleted (EIO), and a
 * following mount says to open the archive again. */
#ifndef TRAJFS_STORE_REGENERATE_H
#define TRAJFS_STORE_REGENERATE_H

#include "common/error.h"
#include "format/container.h"
#include "store/gc.h"

/* progress as tf_gc's, with the bytes downloaded first. */
int tf_regenerate(const char *url, const tf_remote_opts *remote,
                  void (*progress)(void *arg, uint64_t bytes), void *progress_arg, tf_gc_stats *stats,
                  tf_error *e);

#endif
