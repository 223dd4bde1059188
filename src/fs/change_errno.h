/* The errno a request gets for a change of the archive that failed. */
#ifndef TRAJFS_FS_CHANGE_ERRNO_H
#define TRAJFS_FS_CHANGE_ERRNO_H

#include "common/error.h"

/* The store's own reason when it is one the caller can act on, else
 * EIO. */
int fs_change_errno(const tf_error *e);
/* The same, logging what the caller's mistake does not explain. */
int fs_change_errno_logged(const tf_error *e);

#endif
