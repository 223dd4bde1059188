#include "fs/readbuf.h"

#include <stdlib.h>

typedef struct {
    size_t cap;
    uint8_t data[];
} thread_buf;

int fs_readbuf_init(fs_readbuf *rb)
{
    return pthread_key_create(&rb->key, free) == 0 ? 0 : -1;
}

void fs_readbuf_destroy(fs_readbuf *rb)
{
    free(pthread_getspecific(rb->key));
    pthread_key_delete(rb->key);
}

uint8_t *fs_readbuf_get(fs_readbuf *rb, size_t size)
{
    thread_buf *b = pthread_getspecific(rb->key);
    if (b && b->cap >= size)
        return b->data;
    free(b);
    pthread_setspecific(rb->key, NULL);
    b = malloc(sizeof *b + size);
    if (!b || pthread_setspecific(rb->key, b) != 0) {
        free(b);
        return NULL;
    }
    b->cap = size;
    return b->data;
}
