/* The low-level FUSE request handlers of a read-only mount. The session's
 * user data is the fs_state. */
#ifndef TRAJFS_FS_OPS_H
#define TRAJFS_FS_OPS_H

#include "fs/fuse_api.h"

extern const struct fuse_lowlevel_ops fs_ops;

#endif
