/* The reply to an open, read or write alike (ops.c, ops_write.c). */
#ifndef TRAJFS_FS_OPEN_REPLY_H
#define TRAJFS_FS_OPEN_REPLY_H

#include "fs/fuse_api.h"
#include "fs/handles.h"

/* Puts h in the handle table and replies to the open (h is freed on
 * failure). */
void fs_reply_open(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi);

#endif
