/* Hinting the blobs a command reads in order, a bounded window ahead of
 * it (tf_reader_will_need), so that a remote archive fetches them
 * together in merged ranges instead of one request a blob, and a local
 * one has the kernel read them ahead. */
#ifndef TRAJFS_CLI_HINT_H
#define TRAJFS_CLI_HINT_H

#include <stddef.h>
#include <stdint.h>

#include "store/archive.h"
#include "store/reader.h"

/* How far ahead of the reading the hints go, in reconstructed bytes. */
#define CLI_HINT_WINDOW ((uint64_t)64 << 20)

/* Where the hints over one sequence of blobs are. */
typedef struct {
    size_t next;  /* the first blob not hinted yet */
    uint64_t raw; /* reconstructed bytes of the blobs hinted so far */
} cli_hint;

/* The distinct blobs that the regular files files[0..nfiles) (entry
 * indices) have as chunks, in the order reading the files in that order
 * reads them: a malloc'd array of *n elements, NULL when out of memory. */
uint64_t *cli_blob_order(const tf_archive *ar, const size_t *files, size_t nfiles, size_t *n);

/* Hints blobs[h->next...] (of n) until the hinted ones reconstruct to
 * `until` bytes (counted from the sequence's start) or more. */
void cli_hint_until(cli_hint *h, tf_reader_ctx *r, const tf_archive *ar, const uint64_t *blobs,
                    size_t n, uint64_t until);

#endif
