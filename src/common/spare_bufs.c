#include "common/spare_bufs.h"

#include <stdlib.h>

void tf_spare_bufs_init(tf_spare_bufs *s, size_t keep)
{
    pthread_mutex_init(&s->lock, NULL);
    s->n = 0;
    s->keep = keep < TF_SPARE_BUFS_MAX ? keep : TF_SPARE_BUFS_MAX;
}

static void destroy_buf(tf_buf *b)
{
    tf_buf_free(b);
    free(b);
}

void tf_spare_bufs_destroy(tf_spare_bufs *s)
{
    while (s->n)
        destroy_buf(s->bufs[--s->n]);
    pthread_mutex_destroy(&s->lock);
}

tf_buf *tf_spare_buf_take(tf_spare_bufs *s)
{
    pthread_mutex_lock(&s->lock);
    tf_buf *b = s->n ? s->bufs[--s->n] : NULL;
    pthread_mutex_unlock(&s->lock);
    return b ? b : calloc(1, sizeof *b);
}

void tf_spare_buf_give(tf_spare_bufs *s, tf_buf *b)
{
    if (!b)
        return;
    b->len = 0;
    pthread_mutex_lock(&s->lock);
    if (s->n < s->keep) {
        s->bufs[s->n++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (b)
        destroy_buf(b);
}
