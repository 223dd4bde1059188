#include "fs/open_reply.h"

#include <errno.h>

#include "fs/state.h"

/* Replies to an open with the handle in the table; a reply that fails
 * (the open was interrupted) gets no release, so the handle goes. */
void fs_reply_open(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi)
{
    fs_state *fs = fuse_req_userdata(req);
    uint64_t fh = fs_handles_add(&fs->handles, h);
    if (!fh) {
        fs_handle_free(h);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fi->fh = fh;
    if (fs->direct_io || h->bypass_cache)
        fi->direct_io = 1;
    else if (!fs->writer)
        fi->keep_cache = 1; /* files never change: pages stay valid across opens */
    if (fuse_reply_open(req, fi) != 0)
        fs_handle_free(fs_handles_take(&fs->handles, fh));
}
