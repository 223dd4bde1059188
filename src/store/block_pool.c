#include "store/block_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/malloc_tune.h"

/* Free regions kept for reuse, besides the shared one: a region kept
 * costs neither a mapping nor faults nor the kernel's zeroing of its
 * pages. */
#define SPARES_MAX 4

struct tf_block_region {
    uint8_t *base;
    size_t size;   /* bytes mapped */
    size_t used;   /* bytes given out since the region was last free */
    unsigned live; /* blocks not given back */
};

struct tf_block_pool {
    pthread_mutex_t lock;
    size_t page;
    /* The sizes of the regions with live blocks: written under the lock,
     * read without it, on every release of a cache item. */
    _Atomic size_t bytes;
    tf_block_region *shared;  /* where blocks of a huge page or less are cut */
    tf_block_region *spare[SPARES_MAX];
    unsigned n_spares;
};

tf_block_pool *tf_block_pool_new(void)
{
    tf_block_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    long page = sysconf(_SC_PAGESIZE);
    p->page = page > 0 ? (size_t)page : 4096;
    return p;
}

static void unmap_region(tf_block_region *r)
{
    munmap(r->base, r->size);
    free(r);
}

void tf_block_pool_free(tf_block_pool *p)
{
    if (!p)
        return;
    if (p->shared)
        unmap_region(p->shared);
    for (unsigned i = 0; i < p->n_spares; i++)
        unmap_region(p->spare[i]);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* A new region of size bytes (whole pages) at a huge page boundary: a
 * mapping larger by a huge page, less its unaligned ends. */
static tf_block_region *map_region(const tf_block_pool *p, size_t size)
{
    tf_block_region *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    const size_t span = size + TF_HUGE_PAGE_BYTES - p->page;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(r);
        return NULL;
    }
    uint8_t *base = m + (TF_HUGE_PAGE_BYTES - (uintptr_t)m % TF_HUGE_PAGE_BYTES) % TF_HUGE_PAGE_BYTES;
    if (base > m)
        munmap(m, (size_t)(base - m));
    if (m + span > base + size)
        munmap(base + size, (size_t)(m + span - (base + size)));
#ifdef MADV_HUGEPAGE
    madvise(base, size, MADV_HUGEPAGE); /* a hint: where refused, 4 KiB pages */
#endif
    *r = (tf_block_region){ .base = base, .size = size };
    return r;
}

/* A kept region of exactly size bytes, taken off the list; NULL when
 * there is none. */
static tf_block_region *take_spare(tf_block_pool *p, size_t size)
{
    for (unsigned i = p->n_spares; i-- > 0;) {
        tf_block_region *r = p->spare[i];
        if (r->size == size) {
            memmove(p->spare + i, p->spare + i + 1, (--p->n_spares - i) * sizeof *p->spare);
            return r;
        }
    }
    return NULL;
}

/* Keeps a free region in place of the oldest one kept. */
static void keep_spare(tf_block_pool *p, tf_block_region *r)
{
    if (p->n_spares == SPARES_MAX) {
        unmap_region(p->spare[0]);
        memmove(p->spare, p->spare + 1, --p->n_spares * sizeof *p->spare);
    }
    p->spare[p->n_spares++] = r;
}

/* The region to cut need bytes from: the shared one while it has room
 * for a block of a huge page or less, else a kept or new one. */
static tf_block_region *region_for(tf_block_pool *p, size_t need)
{
    const bool shares = need <= TF_HUGE_PAGE_BYTES;
    if (shares && p->shared && p->shared->size - p->shared->used >= need)
        return p->shared;
    const size_t size = shares ? TF_HUGE_PAGE_BYTES : need;
    tf_block_region *r = take_spare(p, size);
    if (!r)
        r = map_region(p, size);
    /* A full shared region lives on until its blocks come back, then
     * goes to the spares (tf_block_pool_give): a free one has room. */
    if (r && shares)
        p->shared = r;
    return r;
}

uint8_t *tf_block_pool_take(tf_block_pool *p, size_t len, tf_block_region **region)
{
    const size_t need = (len + p->page - 1) / p->page * p->page;
    if (need < len)
        return NULL; /* len near SIZE_MAX */
    pthread_mutex_lock(&p->lock);
    tf_block_region *r = region_for(p, need);
    uint8_t *block = NULL;
    if (r) {
        if (r->live++ == 0)
            atomic_fetch_add_explicit(&p->bytes, r->size, memory_order_relaxed);
        block = r->base + r->used;
        r->used += need;
    }
    pthread_mutex_unlock(&p->lock);
    if (!block)
        return NULL;
#ifdef MADV_POPULATE_WRITE
    /* One call faults in what the decoder would fault page by page
     * (nothing where the region's pages are in from earlier blocks). */
    madvise(block, need, MADV_POPULATE_WRITE);
#endif
    *region = r;
    return block;
}

void tf_block_pool_give(tf_block_pool *p, tf_block_region *r)
{
    pthread_mutex_lock(&p->lock);
    if (--r->live == 0) {
        atomic_fetch_sub_explicit(&p->bytes, r->size, memory_order_relaxed);
        r->used = 0;
        if (r != p->shared)
            keep_spare(p, r);
    }
    pthread_mutex_unlock(&p->lock);
}

size_t tf_block_pool_bytes(tf_block_pool *p)
{
    return atomic_load_explicit(&p->bytes, memory_order_relaxed);
}
