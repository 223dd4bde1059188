/* Repacking: rewriting an archive with other writer settings (longer
 * chains for cold storage once training is over, another chunk size):
 * every live file is reconstructed and added again through the writer,
 * into a new archive that then replaces the old one (store/rewrite.h). */
#ifndef TRAJFS_STORE_REPACK_H
#define TRAJFS_STORE_REPACK_H

#include <stdint.h>

#include "common/error.h"
#include "store/write_opts.h"

typedef struct tf_repack tf_repack;

/* Opens the local archive at path as its single writer (EBUSY while
 * another writer has it; a URL is refused), held until tf_repack_close. */
int tf_repack_open(const char *path, tf_repack **out, tf_error *e);
void tf_repack_close(tf_repack *rp);

/* Bytes of the archive's live regular files: what the writer's progress
 * callback will count up to. */
uint64_t tf_repack_file_bytes(const tf_repack *rp);

typedef struct {
    uint64_t files;                          /* regular files re-encoded */
    uint64_t bytes_before, bytes_after;      /* archive file sizes */
    uint64_t allocated_before, allocated_after; /* what the disk holds of them */
} tf_repack_stats;

/* Writes the new archive with the writer settings opts and chunks of
 * 2^chunk_shift elements (0: the archive's), and replaces the archive
 * with it. The new archive is what `trajpack create` of the same files
 * would store: the files of each directory in natural order (the
 * checkpoints of a run in step order, each a delta against the ones
 * before it as the writer chooses), each directory before its contents.
 * Every entry keeps its path, inode number, mode and time, symbolic links
 * their targets, and no inode number ever given is given again. A file
 * that does not reconstruct (damaged stored bytes) stops the repack, and
 * the old archive stays as it is. The files are reconstructed one at a
 * time into an unnamed file beside the archive. */
int tf_repack_run(tf_repack *rp, const tf_write_opts *opts, unsigned chunk_shift,
                  tf_repack_stats *stats, tf_error *e);

#endif
