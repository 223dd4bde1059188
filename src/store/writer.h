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
#include <time.h>

#include "common/error.h"
#include "store/archive.h"
#include "store/write_opts.h"

/* What a caller that manages inodes itself (a mount) says about an entry
 * it adds. */
typedef struct {
    uint64_t ino;          /* from tf_writer_new_ino, and not live at another
                            * path; 0: the writer's choice (a new number, or
                            * the old one of a directory added again) */
    uint32_t mode;         /* permission bits */
    struct timespec mtime;
} tf_entry_attrs;

typedef struct tf_writer tf_writer;

/* Opens (or, with create, creates with chunk_shift) an archive as its
 * single writer. */
int tf_writer_open(const char *archive, bool create, unsigned chunk_shift,
                   const tf_write_opts *opts, tf_writer **out, tf_error *e);
void tf_writer_close(tf_writer *w);
tf_archive *tf_writer_archive(tf_writer *w);
/* The reader the writer reconstructs parents with (its cache bounded by
 * opts.cache_bytes), until tf_writer_close. Other threads may read the
 * archive through it too (a mount does: one cache, one bound). */
struct tf_reader_ctx *tf_writer_reader(tf_writer *w);

/* Adds the file, directory or symlink at src (not recursive) as archive
 * path dest, creating missing parent directories. A regular file whose
 * name ends in .safetensors must parse as one. parent, when non-NULL, is
 * the archive path of the checkpoint to delta against; otherwise the
 * previous file of the same series in natural order. Each call commits. */
int tf_writer_add(tf_writer *w, const char *src, const char *dest,
                  const char *parent, tf_error *e);

/* A new inode number, never handed out before and never reused: for
 * entries a caller adds with tf_entry_attrs. Any thread may call it. */
uint64_t tf_writer_new_ino(tf_writer *w);

/* Adds the regular file open as fd (all of it, from offset 0) as archive
 * path dest, and commits. The file is mapped, not read into memory, and
 * must not change until this returns. Unlike tf_writer_add, its content
 * decides what it is: a valid safetensors file is stored per tensor
 * whatever its name (temporary names are common when files are copied);
 * a non-empty file named *.safetensors that is not one fails with EINVAL;
 * anything else is stored as opaque bytes. series_path (dest when NULL)
 * is the path whose series gives the parent checkpoint and whose name the
 * .safetensors rule looks at. */
int tf_writer_add_fd(tf_writer *w, int fd, const char *dest, const char *series_path,
                     const tf_entry_attrs *attrs, tf_error *e);

/* Edits of the tree, one commit each; the errors are rename(2)'s and
 * mkdir(2)'s (see store/commit.h). */
int tf_writer_mkdir(tf_writer *w, const char *path, const tf_entry_attrs *attrs, tf_error *e);
int tf_writer_symlink(tf_writer *w, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e);
/* Removes path and everything below it (a tombstone). */
int tf_writer_remove(tf_writer *w, const char *path, tf_error *e);
int tf_writer_move(tf_writer *w, const char *from, const char *to, tf_error *e);
int tf_writer_set_attrs(tf_writer *w, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e);

#endif
