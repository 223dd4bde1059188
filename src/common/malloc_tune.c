#include "common/malloc_tune.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGES_TUNABLE "glibc.malloc.hugetlb"

/* What a thread's heap can be readied for (tf_malloc_thread_heap): only
 * where the heap is to use huge pages, freed blocks stay in it, and
 * threads have heaps of their own. */
static bool huge_pages, heaps_keep, one_heap;

void tf_malloc_huge_pages(char **argv)
{
#ifdef __GLIBC__
    const char *tunables = getenv("GLIBC_TUNABLES");
    const char *set = tunables ? strstr(tunables, HUGE_PAGES_TUNABLE) : NULL;
    if (set) {
        /* set already: by us before the restart, or by the user (0: off) */
        const char *v = set + strlen(HUGE_PAGES_TUNABLE);
        huge_pages = v[0] == '=' && (v[1] == '1' || v[1] == '2');
        return;
    }
    char value[4096];
    int n = tunables ? snprintf(value, sizeof value, "%s:%s=1", tunables, HUGE_PAGES_TUNABLE)
                     : snprintf(value, sizeof value, "%s=1", HUGE_PAGES_TUNABLE);
    if (n < 0 || (size_t)n >= sizeof value || setenv("GLIBC_TUNABLES", value, 1) < 0)
        return;
    execv("/proc/self/exe", argv);
    /* No restart (no /proc): go on with 4 KiB pages, and leave the
     * environment of what this program runs as it was. */
    if (tunables)
        setenv("GLIBC_TUNABLES", tunables, 1);
    else
        unsetenv("GLIBC_TUNABLES");
#else
    (void)argv;
#endif
}

/* Blocks from this size on are mapped on their own (tf_malloc_reuse). */
#define MMAP_THRESHOLD_BYTES ((size_t)32 << 20)

void tf_malloc_reuse(void)
{
    mallopt(M_MMAP_THRESHOLD, (int)MMAP_THRESHOLD_BYTES);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    heaps_keep = true;
}

void tf_malloc_one_heap(void)
{
    one_heap = true;
    mallopt(M_ARENA_MAX, 1);
}

/* A thread's heap holds at most 64 MiB (glibc's HEAP_MAX_SIZE): two
 * blocks a huge page under the mapping threshold ready most of it. */
#define THREAD_HEAP_BLOCKS 2
#define THREAD_HEAP_BLOCK_BYTES (MMAP_THRESHOLD_BYTES - TF_HUGE_PAGE_BYTES)

void tf_malloc_thread_heap(void)
{
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    static _Thread_local bool ready;
    if (ready || !huge_pages || !heaps_keep || one_heap)
        return;
    ready = true;
    uint8_t *blocks[THREAD_HEAP_BLOCKS];
    for (unsigned i = 0; i < THREAD_HEAP_BLOCKS; i++) {
        uint8_t *block = blocks[i] = malloc(THREAD_HEAP_BLOCK_BYTES);
        if (!block)
            continue;
        uintptr_t lo = ((uintptr_t)block + TF_HUGE_PAGE_BYTES - 1) & ~(TF_HUGE_PAGE_BYTES - 1);
        uintptr_t hi = ((uintptr_t)block + THREAD_HEAP_BLOCK_BYTES) & ~(TF_HUGE_PAGE_BYTES - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a hint: where refused, 4 KiB pages */
    }
    for (unsigned i = 0; i < THREAD_HEAP_BLOCKS; i++)
        free(blocks[i]);
#endif
}
