/* The malloc settings of trajfs's programs (glibc). */
#ifndef TRAJFS_COMMON_MALLOC_TUNE_H
#define TRAJFS_COMMON_MALLOC_TUNE_H

#include <stddef.h>

/* The size of a transparent huge page on x86-64 and arm64 (4 KiB base
 * pages). */
#define TF_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* Has malloc back its blocks with transparent huge pages where the
 * system allows them on request (madvise). Encoding a checkpoint touches
 * tens of megabytes of fresh memory (fields, streams, the deltas a
 * commit holds back), each 4 KiB page one fault: in a virtual machine
 * the faults took 60% of `trajpack add` of one bf16 checkpoint, and with
 * huge pages the add took 0.10 s of CPU instead of 0.25 s. glibc takes
 * this setting (the tunable glibc.malloc.hugetlb) only from the
 * environment at start, so the program starts itself again, once, with
 * it set, unless the environment already says either way. argv: main's.
 * First thing in main; returns when the program goes on as it is. */
void tf_malloc_huge_pages(char **argv);

/* Keeps freed blocks of up to 32 MB in the heap for reuse, and up to
 * 64 MB of free heap top, where glibc would map fresh zeroed pages for
 * most of them. Encoding and decoding allocate and free a chunk's fields
 * and tables (megabytes each) many times a tensor: with glibc's defaults
 * a quarter of `trajpack create -T 1` of float32 Adam state went to page
 * faults, and it took 5.3 s instead of 3.7 s (peak memory 141 MB instead
 * of 188 MB). The blocks that stay (a reader's cache of reconstructed
 * chunks) are mapped on their own (tf_cache_buffer). */
void tf_malloc_reuse(void);

/* Readies the calling thread's heap for huge pages, once a thread: first
 * thing in a worker thread. Later calls return at once, and so do all
 * calls unless tf_malloc_huge_pages left huge pages on, tf_malloc_reuse
 * ran and tf_malloc_one_heap did not. glibc gives each thread an arena
 * of its own, whose heap it makes writable a few pages at a time and
 * does not advise for huge pages: every 4 KiB page a worker touched first
 * was a fault, 10-13 us each in a virtual machine. This takes two blocks
 * of 30 MiB from the thread's heap, advises their whole huge pages and
 * frees them: the heap keeps those writable pages (tf_malloc_reuse), and
 * the thread's blocks are carved from them, a fault per 2 MiB. The pages
 * are only reserved: memory is used as they are touched. `trajpack add`
 * of an AdamW checkpoint took 0.23 s instead of 0.37 s (one block of 16
 * MiB: 0.31 s), of a bf16 checkpoint 0.107 s instead of 0.153 s. */
void tf_malloc_thread_heap(void);

/* Has every thread allocate from the main heap, which grows by whole huge
 * pages (tf_malloc_huge_pages), instead of an arena of its own: for the
 * daemon, whose libfuse threads are a dozen, each decoding now and then.
 * Their own arenas cost each of them its first pages' faults (3,500 in a
 * cold read of the benchmark's oldest checkpoint, 400 with one heap, and
 * 0.88x the time). Threads that allocate at the same time meet on the
 * heap's lock: `trajpack create` of 1,000 small checkpoints took 1.43x as
 * long with one heap, so trajpack keeps the arenas; writes of small
 * checkpoints into a mount took the same time either way. Before threads
 * start. */
void tf_malloc_one_heap(void);

#endif
