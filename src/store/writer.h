/* Adding files to an archive: each regular file is parsed, its tensors
 * split into chunks, each chunk deduplicated by content id or encoded
 * with the smallest of the applicable codecs (a delta against the same
 * tensor of the parent checkpoint, or a self-contained codec), then the
 * file is committed. One commit per file: a crash loses at most the file
 * being added. */
#ifndef TRAJFS_STORE_WRITER_H
#define TRAJFS_STORE_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "store/archive.h"

#define TF_MAX_CHAIN_DEFAULT 16

typedef struct {
    unsigned threads;     /* encoder threads, >= 1 */
    unsigned max_chain;   /* longest delta chain before a keyframe */
    int zstd_level;       /* for the zstd-based codecs */
    /* Called on the calling thread with the number of tensor or file
     * bytes consumed since the previous call (may be NULL). */
    void (*progress)(void *arg, uint64_t bytes);
    void *progress_arg;
} tf_write_opts;

void tf_write_opts_default(tf_write_opts *o);

typedef struct tf_writer tf_writer;

/* Opens (or, with create, creates with chunk_shift) an archive as its
 * single writer. */
int tf_writer_open(const char *archive, bool create, unsigned chunk_shift,
                   const tf_write_opts *opts, tf_writer **out, tf_error *e);
void tf_writer_close(tf_writer *w);
tf_archive *tf_writer_archive(tf_writer *w);

/* Adds the file, directory or symlink at src (not recursive) as archive
 * path dest, creating missing parent directories. A regular file whose
 * name ends in .safetensors must parse as one. parent, when non-NULL, is
 * the archive path of the checkpoint to delta against; otherwise the
 * previous file of the same series in natural order. Each call commits. */
int tf_writer_add(tf_writer *w, const char *src, const char *dest,
                  const char *parent, tf_error *e);

#endif
