#include "fs/change_errno.h"

#include <errno.h>

#include "fs/log.h"

int fs_change_errno(const tf_error *e)
{
    switch (e->errnum) {
    case ENOENT: case EEXIST: case ENOTDIR: case EISDIR: case ENOTEMPTY: case EINVAL:
    case ENAMETOOLONG: case EPERM: case ENOSPC: case EDQUOT: case EFBIG: case ENOMEM:
        return e->errnum;
    default:
        return EIO;
    }
}

int fs_change_errno_logged(const tf_error *e)
{
    int err = fs_change_errno(e);
    switch (err) {
    case ENOENT: case EEXIST: case ENOTDIR: case EISDIR: case ENOTEMPTY: case EINVAL:
    case ENAMETOOLONG: case EPERM:
        break;
    default:
        fs_log(LOG_ERR, "%s", e->msg);
    }
    return err;
}
