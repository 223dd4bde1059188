/* The malloc settings of trajfs's programs (glibc). */
#ifndef TRAJFS_COMMON_MALLOC_TUNE_H
#define TRAJFS_COMMON_MALLOC_TUNE_H

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

#endif
