/* How stored blobs spend their bytes, for `trajpack stats`: the parts of
 * a ulp blob's bits and the program of a prog blob, read from the archive
 * and taken apart by their codecs (codec/ulp/ulp_stats.h, whose
 * tf_ulp_bits and its sums come with this header; codec/prog/prog.h). */
#ifndef TRAJFS_STORE_BLOB_STATS_H
#define TRAJFS_STORE_BLOB_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "codec/ulp/ulp_stats.h"
#include "common/buf.h"
#include "common/error.h"
#include "store/archive.h"
#include "store/reader.h"

/* Takes ulp blobs apart with what their decode needs, their reference
 * and their model, reconstructed by a reader. The chunks of a tensor
 * share its model: the last one is kept. */
typedef struct tf_ulp_blobs tf_ulp_blobs;

/* NULL when out of memory. */
tf_ulp_blobs *tf_ulp_blobs_new(tf_reader_ctx *r);
void tf_ulp_blobs_free(tf_ulp_blobs *u);

/* Adds the breakdown of ulp blob b (tf_ulp_breakdown) to *bits; its
 * tables count nothing of the model blob (the caller knows whether that
 * was charged). 0, or -1 with *bits unchanged. */
int tf_ulp_blobs_breakdown(tf_ulp_blobs *u, uint64_t b, tf_ulp_bits *bits, tf_error *e);

/* The one-line text of the program of prog blob b
 * (tf_prog_describe_chunk; out gets at most outsz - 1 characters and a
 * NUL), its stored bytes read into payload: 0, or -1 when they cannot be
 * read or are not a valid program. */
int tf_blob_program_text(tf_archive *ar, uint64_t b, tf_buf *payload, char *out, size_t outsz,
                         tf_error *e);

#endif
