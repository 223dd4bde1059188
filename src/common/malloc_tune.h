/* The malloc settings of trajfs's programs (glibc). */
#ifndef TRAJFS_COMMON_MALLOC_TUNE_H
#define TRAJFS_COMMON_MALLOC_TUNE_H

/* Keeps freed blocks of up to 32 MB in the heap for reuse, and up to
 * 64 MB of free heap top, where glibc would map fresh zeroed pages for
 * most of them. Encoding and decoding allocate and free a chunk's fields
 * and tables (megabytes each) many times a tensor: with glibc's defaults
 * a quarter of `trajpack create -T 1` of float32 Adam state went to page
 * faults, and it took 5.3 s instead of 3.7 s (peak memory 141 MB instead
 * of 188 MB). The blocks that stay (a reader's cache of reconstructed
 * chunks) are mapped on their own (tf_cache_buffer). First thing in main. */
void tf_malloc_reuse(void);

#endif
