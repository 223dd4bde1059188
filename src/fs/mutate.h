/* The changes a read-write mount makes to its archive, as jobs for the
 * committer thread (committer.h). A job makes one change (one commit, or
 * none when a check fails), replies to its request and frees itself.
 * Its checks against the tree need no lock: only that thread changes it.
 *
 * A written file is committed at the path its handle names (handles.h).
 * When that path holds a regular file, the new content takes over that
 * file's inode number, as an overwrite in place would, so the kernel's
 * names stay right; the kernel is told to drop the old content's pages. */
#ifndef TRAJFS_FS_MUTATE_H
#define TRAJFS_FS_MUTATE_H

#include <stdint.h>
#include <sys/stat.h>

#include "fs/fuse_api.h"

struct fs_state;

typedef enum {
    FS_JOB_COMMIT,  /* flush or fsync of a write handle: commit its changes */
    FS_JOB_RELEASE, /* the last close of a write handle: commit what was not
                     * (errors are logged), then free it; no reply */
    FS_JOB_STREAM,  /* encode a write handle's file as it is written and
                     * commit it at its close (fs/stream.h); no reply */
    FS_JOB_MKDIR,
    FS_JOB_SYMLINK,
    FS_JOB_UNLINK,
    FS_JOB_RMDIR,
    FS_JOB_RENAME,
    FS_JOB_SETATTR, /* mode, time or size of a committed entry */
} fs_job_kind;

struct fs_job {
    struct fs_job *next; /* the committer's queue */
    fs_job_kind kind;
    fuse_req_t req;
    uint64_t ino, fh;             /* COMMIT, RELEASE, STREAM, SETATTR */
    uint64_t serial;              /* STREAM: the handle's */
    uint64_t parent, new_parent;  /* directory inodes */
    char *name, *new_name, *target;
    mode_t mode;                  /* MKDIR */
    unsigned flags;               /* RENAME */
    struct stat attr;             /* SETATTR */
    int to_set;
};

/* A job with copies of the strings given (NULL: none). NULL when out of
 * memory. */
struct fs_job *fs_job_new(fs_job_kind kind, fuse_req_t req, const char *name,
                          const char *new_name, const char *target);
void fs_job_run(struct fs_state *fs, struct fs_job *job);

#endif
