/* The libfuse API level trajfs is written against (3.12: the
 * multithreaded loop's fuse_loop_cfg_*). Include libfuse through here. */
#ifndef TRAJFS_FS_FUSE_API_H
#define TRAJFS_FS_FUSE_API_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#endif
