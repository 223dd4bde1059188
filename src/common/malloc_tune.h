/* The malloc settings of a process that encodes (glibc). */
#ifndef TRAJFS_COMMON_MALLOC_TUNE_H
#define TRAJFS_COMMON_MALLOC_TUNE_H

/* Keeps freed blocks of up to 32 MB in the heap for reuse, and up to
 * 64 MB of free heap top, where glibc would map fresh zeroed pages for
 * most of them. The program search allocates and frees a chunk's fields
 * (megabytes each) many times a tensor: with glibc's defaults a quarter
 * of `trajpack create -T 1` of float32 Adam state went to page faults,
 * and it took 5.3 s instead of 3.7 s (peak memory 141 MB instead of
 * 188 MB). For the programs that write archives, first thing in main. */
void tf_malloc_for_encoding(void);

#endif
