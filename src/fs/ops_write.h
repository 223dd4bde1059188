/* The request handlers that change a read-write mount (ops.c has the
 * table). Writes go to the handle's spool at once; every change of the
 * archive is a job for the committer thread (commit_jobs.h, tree_jobs.h),
 * which replies.
 * In a read-only mount they answer EROFS. */
#ifndef TRAJFS_FS_OPS_WRITE_H
#define TRAJFS_FS_OPS_WRITE_H

#include <sys/stat.h>

#include "fs/fuse_api.h"
#include "fs/handles.h"

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t new_parent,
                  const char *new_name, unsigned int flags);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char *new_name);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);

/* open(2) for writing of a committed file: a write handle whose spool
 * starts with the file's content (none with O_TRUNC). */
void fs_open_for_writing(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* The last close of a write handle: what it did not commit yet is
 * committed later (errors are logged: nobody waits for them). */
void fs_release_writing(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif
