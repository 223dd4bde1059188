/* Space kept for open files: a removal or replacement in a read-write
 * mount does not give back what a file still open (a version the mount's
 * handles read) needs (tf_write_opts.open_versions). Once such a file
 * closes, a job on the committer thread gives back what nothing reads
 * any more. */
#ifndef TRAJFS_FS_GIVE_BACK_JOB_H
#define TRAJFS_FS_GIVE_BACK_JOB_H

#include "fs/state.h"
#include "store/archive.h"

/* tf_write_opts.open_versions of the mount: each open read handle's
 * version. */
void fs_open_versions(void *fs, void (*keep)(void *keep_arg, const tf_entry *ent), void *keep_arg);

/* A read handle closed: queues the give-back when space is owed (when
 * out of memory, the next owed give-back or the unmount does it). */
void fs_queue_give_back(fs_state *fs);

#endif
