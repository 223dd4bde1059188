/* Spare buffers: empty buffers kept between uses by threads that each
 * need one for a while (a decode's payload), so that filling one that
 * is mapped already costs no allocation and no page faults (a fresh
 * multi-MiB buffer is mapped and zeroed page by page). At most `keep`
 * are kept, so the memory held stays bounded whatever the number of
 * threads; more users at once get buffers of their own. */
#ifndef TRAJFS_COMMON_SPARE_BUFS_H
#define TRAJFS_COMMON_SPARE_BUFS_H

#include <pthread.h>
#include <stddef.h>

#include "common/buf.h"

#define TF_SPARE_BUFS_MAX 128

typedef struct {
    pthread_mutex_t lock;
    tf_buf *bufs[TF_SPARE_BUFS_MAX];
    size_t n, keep;
} tf_spare_bufs;

/* Keeps up to keep buffers (at most TF_SPARE_BUFS_MAX). */
void tf_spare_bufs_init(tf_spare_bufs *s, size_t keep);
/* Frees the buffers kept. */
void tf_spare_bufs_destroy(tf_spare_bufs *s);

/* An empty buffer, a kept one when there is; NULL when out of memory. */
tf_buf *tf_spare_buf_take(tf_spare_bufs *s);
/* Gives back a buffer from tf_spare_buf_take (NULL: nothing): kept, or
 * freed when enough are. */
void tf_spare_buf_give(tf_spare_bufs *s, tf_buf *b);

#endif
