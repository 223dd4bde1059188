/* One reply buffer per worker thread for reads, kept for the thread's
 * life: a read costs neither an allocation nor the page faults of a fresh
 * mapping. */
#ifndef TRAJFS_FS_READBUF_H
#define TRAJFS_FS_READBUF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    pthread_key_t key;
} fs_readbuf;

int fs_readbuf_init(fs_readbuf *rb);
/* Frees the calling thread's buffer too; call after the workers ended. */
void fs_readbuf_destroy(fs_readbuf *rb);
/* The calling thread's buffer, grown to at least size bytes; NULL when
 * out of memory. */
uint8_t *fs_readbuf_get(fs_readbuf *rb, size_t size);

#endif
