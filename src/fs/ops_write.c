#include "fs/ops_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "fs/attr.h"
#include "fs/commit_jobs.h"
#include "fs/open_reply.h"
#include "fs/spool.h"
#include "fs/state.h"
#include "fs/tree_jobs.h"
#include "fs/view.h"

/* The kernel sends at most max_write bytes (1 MiB by default) per write. */
#define WRITE_MAX ((size_t)64 << 20)

/* The mount's state, or NULL after replying EROFS (a read-only mount:
 * the kernel refuses most changes itself). */
static fs_state *writable(fuse_req_t req)
{
    fs_state *fs = fuse_req_userdata(req);
    if (!fs->writer) {
        fuse_reply_err(req, EROFS);
        return NULL;
    }
    return fs;
}

/* Checks a new name in directory parent: 0 or an errno value. */
static int check_new_name(fs_state *fs, fuse_ino_t parent, const char *name, bool *exists)
{
    char path[TF_PATH_MAX + 1];
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *dir = fs_tree_by_ino(&fs->tree, parent);
    int err = !dir ? ENOENT : !fs_node_is_dir(dir) ? ENOTDIR : fs_tree_child_path(dir, name, path);
    *exists = !err && fs_tree_child(&fs->tree, dir, name);
    pthread_rwlock_unlock(&fs->view_lock);
    return err;
}

/* ---- files ---- */

/* A new file: a write handle with an empty spool and a new inode, which
 * gets a name only when its first commit is done. */
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi)
{
    fs_state *fs = writable(req);
    if (!fs)
        return;
    bool exists;
    int err = check_new_name(fs, parent, name, &exists);
    if (!err && exists && (fi->flags & O_EXCL))
        err = EEXIST;
    int spool = err ? -1 : fs_spool_create(fs->spool_dir);
    if (spool < 0) {
        fuse_reply_err(req, err ? err : -spool);
        return;
    }
    fs_write_attrs a = { .ino = tf_writer_new_ino(fs->writer), .parent = parent,
                         .mode = mode & 07777 };
    tf_time_of_day(&a.mtime);
    fs_handle *h = fs_handle_new_write(&a, name, spool, true);
    uint64_t fh = h ? fs_handles_add(&fs->handles, h) : 0;
    if (!fh) {
        if (h)
            fs_handle_free(h);
        else
            close(spool);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fs_queue_stream(fs, a.ino, fh, h->serial);
    fi->fh = fh;
    fi->direct_io = fs->direct_io;
    struct fuse_entry_param ep;
    fs_entry_of_writing(fs, &a, &ep);
    if (fuse_reply_create(req, &ep, fi) != 0)
        fs_handle_free(fs_handles_take(&fs->handles, fh));
}

/* What a write handle of a committed file starts from. */
typedef struct {
    fs_write_attrs attrs;
    char name[TF_NAME_MAX + 1];
    tf_entry content; /* copy of the version opened */
} opened_file;

static int snapshot(fs_state *fs, fuse_ino_t ino, opened_file *f)
{
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    int err = 0;
    if (!n) /* also a file not committed yet: it has no name to open */
        err = ENOENT;
    else if (fs_node_is_dir(n))
        err = EISDIR;
    else if (n->ent->kind == TF_ENTRY_SYMLINK)
        err = EINVAL;
    else if (tf_entry_clone(n->ent, NULL, &f->content, NULL) < 0)
        err = ENOMEM;
    if (!err) {
        f->attrs = (fs_write_attrs){
            .ino = n->ino, .size = n->ent->size, .parent = fs_tree_parent(&fs->tree, n)->ino,
            .mode = n->ent->mode,
            .mtime = { .tv_sec = n->ent->mtime_sec, .tv_nsec = n->ent->mtime_nsec },
        };
        strcpy(f->name, n->name);
    }
    pthread_rwlock_unlock(&fs->view_lock);
    return err;
}

void fs_open_for_writing(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = fuse_req_userdata(req);
    opened_file f = { 0 };
    int err = snapshot(fs, ino, &f);
    bool truncate = fi->flags & O_TRUNC;
    int spool = err ? -1 : fs_spool_create(fs->spool_dir);
    if (!err && spool < 0)
        err = -spool;
    tf_error e;
    if (!err && !truncate)
        err = fs_fill_spool(fs, spool, &f.content, f.content.size, &e);
    tf_entry_free(&f.content);
    if (err) {
        if (spool >= 0)
            close(spool);
        fuse_reply_err(req, err);
        return;
    }
    if (truncate) {
        f.attrs.size = 0;
        tf_time_of_day(&f.attrs.mtime);
    }
    fs_handle *h = fs_handle_new_write(&f.attrs, f.name, spool, truncate);
    if (!h) {
        close(spool);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    uint64_t serial = h->serial; /* h may be gone once the reply is sent */
    fi->fh = 0;
    fs_reply_open(req, h, fi);
    if (truncate && fi->fh)
        fs_queue_stream(fs, f.attrs.ino, fi->fh, serial);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi)
{
    fs_state *fs = writable(req);
    if (!fs)
        return;
    fs_handle *h = fs_handles_get(&fs->handles, fi->fh, ino);
    if (!h || !h->writable) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (off < 0 || size > WRITE_MAX) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if ((uint64_t)off > (uint64_t)INT64_MAX - size) {
        fuse_reply_err(req, EFBIG);
        return;
    }
    int err = fs_handle_write(&fs->handles, h, buf, size, (uint64_t)off);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, size);
}

/* flush (each close(2), closing) and fsync commit the handle's changes:
 * close() returns when they are durable in the archive, or with the
 * error. The file is complete as it is: its stream, if any, need not
 * wait for more (stream_state.h); once committed, a closed handle is at
 * rest (fs_handles_add). */
static void commit_changes(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                           bool closing)
{
    fs_state *fs = fuse_req_userdata(req);
    fs_handle *h = fs_handles_get(&fs->handles, fi->fh, ino);
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    if (!h || !h->writable) {
        fuse_reply_err(req, h ? 0 : EBADF);
        return;
    }
    fs_stream_state_close(&h->stream);
    if (closing)
        fs_handles_note_flush(&fs->handles, h);
    if (!fs_handles_pending_commit(&fs->handles, h, false, &a, name))
        fuse_reply_err(req, 0);
    else
        fs_queue_commit(fs, req, ino, fi->fh);
}

void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    commit_changes(req, ino, fi, true);
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    commit_changes(req, ino, fi, false);
}

/* Every change of the tree is durable when its request is answered. */
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    fuse_reply_err(req, 0);
}

/* The handle leaves the table at once: it no longer answers for its
 * file (fs_handles_attrs), whenever its job runs. */
void fs_release_writing(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = fuse_req_userdata(req);
    (void)ino;
    fs_handle *h = fs_handles_take(&fs->handles, fi->fh);
    fuse_reply_err(req, 0);
    if (!h)
        return;
    fs_stream_state_close(&h->stream);
    fs_queue_release(fs, h);
}

/* ---- attributes ---- */

/* chmod, utimes and truncate. Write handles of the inode take the change
 * at once (ftruncate only the one it names); a committed entry gets a
 * commit. Owners are not stored: only the archive file's are accepted. */
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    fs_state *fs = writable(req);
    if (!fs)
        return;
    if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != fs->archive_st.st_uid) ||
        ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != fs->archive_st.st_gid)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    fs_handle *h = fi ? fs_handles_get(&fs->handles, fi->fh, ino) : NULL;
    if ((to_set & FUSE_SET_ATTR_SIZE) && h) {
        if (!h->writable) {
            fuse_reply_err(req, EBADF);
            return;
        }
        int err = fs_handle_truncate(&fs->handles, h, (uint64_t)attr->st_size);
        if (err) {
            fuse_reply_err(req, err);
            return;
        }
        to_set &= ~FUSE_SET_ATTR_SIZE;
    }
    struct timespec mtime = attr->st_mtim;
    if (to_set & FUSE_SET_ATTR_MTIME_NOW)
        tf_time_of_day(&mtime);
    uint32_t mode = attr->st_mode & 07777;
    bool sets_mtime = to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW);
    fs_handles_set_attrs(&fs->handles, ino, (to_set & FUSE_SET_ATTR_MODE) ? &mode : NULL,
                         sets_mtime ? &mtime : NULL);
    pthread_rwlock_rdlock(&fs->view_lock);
    bool committed = fs_tree_by_ino(&fs->tree, ino) != NULL;
    pthread_rwlock_unlock(&fs->view_lock);
    const int commits = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW |
                        FUSE_SET_ATTR_SIZE;
    if (committed && (to_set & commits)) {
        struct stat resolved = *attr;
        resolved.st_mtim = mtime;
        fs_queue_setattr(fs, req, ino, &resolved, to_set);
        return;
    }
    struct stat st;
    double timeout;
    int err = fs_attr_of_ino(fs, ino, &st, &timeout);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, timeout);
}

/* ---- the tree ---- */

static bool name_fits(fuse_req_t req, const char *name)
{
    if (strlen(name) <= TF_NAME_MAX)
        return true;
    fuse_reply_err(req, ENAMETOOLONG);
    return false;
}

/* A change of name in directory parent (and new_name in new_parent). */
static void queue_tree_change(fuse_req_t req, fs_tree_change kind, fuse_ino_t parent,
                              const char *name, fuse_ino_t new_parent, const char *new_name,
                              const char *target, mode_t mode, unsigned flags)
{
    fs_state *fs = writable(req);
    if (fs && name_fits(req, name) && (!new_name || name_fits(req, new_name)))
        fs_queue_tree_change(fs, req, kind, parent, name, new_parent, new_name, target, mode,
                             flags);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    queue_tree_change(req, FS_TREE_MKDIR, parent, name, 0, NULL, NULL, mode, 0);
}

void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    queue_tree_change(req, FS_TREE_SYMLINK, parent, name, 0, NULL, target, 0777, 0);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    queue_tree_change(req, FS_TREE_UNLINK, parent, name, 0, NULL, NULL, 0, 0);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    queue_tree_change(req, FS_TREE_RMDIR, parent, name, 0, NULL, NULL, 0, 0);
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t new_parent,
                  const char *new_name, unsigned int flags)
{
    queue_tree_change(req, FS_TREE_RENAME, parent, name, new_parent, new_name, NULL, 0, flags);
}

/* The archive has no hard links, devices, FIFOs or sockets. */
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char *new_name)
{
    (void)ino;
    (void)new_parent;
    (void)new_name;
    if (writable(req))
        fuse_reply_err(req, EPERM);
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)parent;
    (void)name;
    (void)mode;
    (void)rdev;
    if (writable(req))
        fuse_reply_err(req, EPERM);
}
