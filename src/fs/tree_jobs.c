#include "fs/tree_jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "fs/attr.h"
#include "fs/change_errno.h"
#include "fs/spool.h"
#include "fs/view.h"

typedef struct {
    fs_job job; /* first: the committer's */
    fs_tree_change kind;
    fuse_req_t req;
    uint64_t parent, new_parent; /* directory inodes */
    char *name, *new_name, *target;
    mode_t mode;
    unsigned flags;
} tree_job;

typedef struct {
    fs_job job; /* first: the committer's */
    fuse_req_t req;
    uint64_t ino;
    struct stat attr;
    int to_set;
} setattr_job;

static void reply_new_entry(fs_state *fs, fuse_req_t req, int err, uint64_t ino)
{
    const fs_node *n = err ? NULL : fs_tree_by_ino(&fs->tree, ino);
    if (!n) {
        fuse_reply_err(req, err ? err : EIO);
        return;
    }
    struct fuse_entry_param ep;
    fs_entry_of_node(fs, n, &ep);
    fuse_reply_entry(req, &ep);
}

/* A new directory or symbolic link; *ino its inode. */
static int make_entry(fs_state *fs, const tree_job *j, uint64_t *ino)
{
    const fs_node *dir;
    char path[TF_PATH_MAX + 1];
    int err = fs_tree_resolve(&fs->tree, j->parent, j->name, &dir, path);
    if (err)
        return err;
    if (fs_tree_child(&fs->tree, dir, j->name))
        return EEXIST;
    tf_entry_attrs a = { .ino = tf_writer_new_ino(fs->writer), .mode = j->mode & 07777 };
    tf_time_of_day(&a.mtime);
    tf_error e;
    int rc = j->kind == FS_TREE_MKDIR ? tf_writer_mkdir(fs->writer, path, &a, &e)
                                      : tf_writer_symlink(fs->writer, path, j->target, &a, &e);
    *ino = a.ino;
    return rc < 0 ? fs_change_errno_logged(&e) : 0;
}

/* unlink and rmdir. */
static int remove_entry(fs_state *fs, const tree_job *j)
{
    const fs_node *dir;
    char path[TF_PATH_MAX + 1];
    int err = fs_tree_resolve(&fs->tree, j->parent, j->name, &dir, path);
    if (err)
        return err;
    const fs_node *n = fs_tree_child(&fs->tree, dir, j->name);
    bool want_dir = j->kind == FS_TREE_RMDIR;
    if (!n)
        return ENOENT;
    if (fs_node_is_dir(n) != want_dir)
        return want_dir ? ENOTDIR : EISDIR;
    if (want_dir && n->nchildren)
        return ENOTEMPTY;
    uint64_t ino = n->ino;
    tf_error e;
    if (tf_writer_remove(fs->writer, path, &e) < 0)
        return fs_change_errno_logged(&e);
    fs_handles_unlink_ino(&fs->handles, ino);
    return 0;
}

static int rename_entry(fs_state *fs, const tree_job *j)
{
    if (j->flags & ~(unsigned)RENAME_NOREPLACE)
        return EINVAL; /* RENAME_EXCHANGE and RENAME_WHITEOUT are not supported */
    const fs_node *dir, *new_dir;
    char from[TF_PATH_MAX + 1], to[TF_PATH_MAX + 1];
    int err = fs_tree_resolve(&fs->tree, j->parent, j->name, &dir, from);
    if (!err)
        err = fs_tree_resolve(&fs->tree, j->new_parent, j->new_name, &new_dir, to);
    if (err)
        return err;
    const fs_node *src = fs_tree_child(&fs->tree, dir, j->name);
    const fs_node *dst = fs_tree_child(&fs->tree, new_dir, j->new_name);
    if (dst && (j->flags & RENAME_NOREPLACE))
        return EEXIST;
    if (!src)
        return ENOENT;
    uint64_t src_ino = src->ino, dst_ino = dst ? dst->ino : 0;
    tf_error e;
    if (tf_writer_move(fs->writer, from, to, &e) < 0)
        return fs_change_errno_logged(&e);
    fs_handles_move_ino(&fs->handles, src_ino, j->new_parent, j->new_name);
    if (dst_ino && dst_ino != src_ino)
        fs_handles_unlink_ino(&fs->handles, dst_ino); /* replaced, as if unlinked */
    return 0;
}

static void run_tree_change(fs_job *job, void *ctx)
{
    fs_state *fs = ctx;
    tree_job *j = (tree_job *)job;
    uint64_t ino = 0;
    switch (j->kind) {
    case FS_TREE_MKDIR:
    case FS_TREE_SYMLINK: {
        int err = make_entry(fs, j, &ino);
        reply_new_entry(fs, j->req, err, ino);
        break;
    }
    case FS_TREE_UNLINK:
    case FS_TREE_RMDIR:
        fuse_reply_err(j->req, remove_entry(fs, j));
        break;
    case FS_TREE_RENAME:
        fuse_reply_err(j->req, rename_entry(fs, j));
        break;
    }
    free(j->name);
    free(j->new_name);
    free(j->target);
    free(j);
}

void fs_queue_tree_change(fs_state *fs, fuse_req_t req, fs_tree_change kind, uint64_t parent,
                          const char *name, uint64_t new_parent, const char *new_name,
                          const char *target, mode_t mode, unsigned flags)
{
    tree_job *j = calloc(1, sizeof *j);
    if (j) {
        *j = (tree_job){ .job = { .run = run_tree_change }, .kind = kind, .req = req,
                         .parent = parent, .new_parent = new_parent, .mode = mode,
                         .flags = flags };
        j->name = strdup(name);
        j->new_name = new_name ? strdup(new_name) : NULL;
        j->target = target ? strdup(target) : NULL;
    }
    if (!j || !j->name || (new_name && !j->new_name) || (target && !j->target)) {
        if (j) {
            free(j->name);
            free(j->new_name);
            free(j->target);
            free(j);
        }
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fs_committer_push(&fs->committer, &j->job);
}

/* ---- attributes ---- */

/* truncate(2) of a committed file: its first size bytes (zeros past its
 * end) committed as its new content. */
static int truncate_file(fs_state *fs, const fs_node *n, const char *path, uint64_t size,
                         const tf_entry_attrs *a)
{
    if (n->ent->kind == TF_ENTRY_SYMLINK)
        return EINVAL;
    int fd = fs_spool_create(fs->spool_dir);
    if (fd < 0)
        return -fd;
    uint64_t keep = size < n->ent->size ? size : n->ent->size;
    tf_error e = { 0 };
    int err = fs_fill_spool(fs, fd, n->ent, keep, &e);
    if (!err && ftruncate(fd, (off_t)size) < 0)
        err = errno;
    if (!err && tf_writer_add_fd(fs->writer, fd, path, NULL, a, &e) < 0)
        err = fs_change_errno_logged(&e);
    close(fd);
    return err;
}

static int set_attrs(fs_state *fs, const setattr_job *j)
{
    const fs_node *n = fs_tree_by_ino(&fs->tree, j->ino);
    if (!n) /* gone meanwhile; write handles of it took the change */
        return fs_handles_attrs(&fs->handles, j->ino, &(fs_write_attrs){ 0 }) ? 0 : ENOENT;
    if (!n->ent) /* the root: its attributes are the archive file's */
        return (j->to_set & FUSE_SET_ATTR_SIZE) ? EISDIR : EPERM;
    tf_entry_attrs a = { .ino = n->ino, .mode = n->ent->mode,
                         .mtime = { n->ent->mtime_sec, n->ent->mtime_nsec } };
    if (j->to_set & FUSE_SET_ATTR_MODE)
        a.mode = j->attr.st_mode & 07777;
    if (j->to_set & FUSE_SET_ATTR_MTIME_NOW)
        tf_time_of_day(&a.mtime);
    else if (j->to_set & FUSE_SET_ATTR_MTIME)
        a.mtime = j->attr.st_mtim;
    else if (j->to_set & FUSE_SET_ATTR_SIZE) /* truncate(2) asks for no time: a
                                              * new size sets it, as anywhere */
        tf_time_of_day(&a.mtime);
    const char *path = n->ent->path;
    if (j->to_set & FUSE_SET_ATTR_SIZE) {
        if (fs_node_is_dir(n))
            return EISDIR;
        return truncate_file(fs, n, path, (uint64_t)j->attr.st_size, &a);
    }
    tf_error e;
    return tf_writer_set_attrs(fs->writer, path, a.mode, a.mtime, &e) < 0
           ? fs_change_errno_logged(&e) : 0;
}

static void run_setattr(fs_job *job, void *ctx)
{
    fs_state *fs = ctx;
    setattr_job *j = (setattr_job *)job;
    struct stat st;
    double timeout;
    int err = set_attrs(fs, j);
    if (!err)
        err = fs_attr_of_ino(fs, j->ino, &st, &timeout);
    if (err)
        fuse_reply_err(j->req, err);
    else
        fuse_reply_attr(j->req, &st, timeout);
    free(j);
}

void fs_queue_setattr(fs_state *fs, fuse_req_t req, uint64_t ino, const struct stat *attr,
                      int to_set)
{
    setattr_job *j = calloc(1, sizeof *j);
    if (!j) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    *j = (setattr_job){ .job = { .run = run_setattr }, .req = req, .ino = ino, .attr = *attr,
                        .to_set = to_set };
    fs_committer_push(&fs->committer, &j->job);
}
