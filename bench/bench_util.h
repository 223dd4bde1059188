/* What the benchmark programs share. */
#ifndef TRAJFS_BENCH_BENCH_UTIL_H
#define TRAJFS_BENCH_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

/* The whole file path in a heap buffer (one byte more than its length,
 * in *len), or NULL when it cannot be read. */
uint8_t *bench_read_file(const char *path, size_t *len);

/* A safetensors file read whole (its length in *len) with its header
 * parsed into h (tf_st_free), or NULL, said on standard error. */
uint8_t *bench_read_safetensors(const char *path, size_t *len, tf_st_header *h);

/* CPU time of this thread, in seconds: on a shared machine the time
 * others take the core would otherwise count. */
double bench_thread_seconds(void);

#endif
