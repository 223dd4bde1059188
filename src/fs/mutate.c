#include "fs/mutate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "fs/attr.h"
#include "fs/fs.h"
#include "fs/log.h"
#include "fs/spool.h"
#include "fs/stream.h"
#include "fs/view.h"

struct fs_job *fs_job_new(fs_job_kind kind, fuse_req_t req, const char *name,
                          const char *new_name, const char *target)
{
    struct fs_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    *j = (struct fs_job){ .kind = kind, .req = req };
    j->name = name ? strdup(name) : NULL;
    j->new_name = new_name ? strdup(new_name) : NULL;
    j->target = target ? strdup(target) : NULL;
    if ((name && !j->name) || (new_name && !j->new_name) || (target && !j->target)) {
        free(j->name);
        free(j->new_name);
        free(j->target);
        free(j);
        return NULL;
    }
    return j;
}

static void job_free(struct fs_job *j)
{
    free(j->name);
    free(j->new_name);
    free(j->target);
    free(j);
}

/* The errno for a failed change: the store's own reason when it is one
 * the caller can act on, else EIO. */
static int errno_of(const tf_error *e)
{
    switch (e->errnum) {
    case ENOENT: case EEXIST: case ENOTDIR: case EISDIR: case ENOTEMPTY: case EINVAL:
    case ENAMETOOLONG: case EPERM: case ENOSPC: case EDQUOT: case EFBIG: case ENOMEM:
        return e->errnum;
    default:
        return EIO;
    }
}

/* errno_of, logging what the caller's mistake does not explain. */
static int failure(const tf_error *e)
{
    int err = errno_of(e);
    switch (err) {
    case ENOENT: case EEXIST: case ENOTDIR: case EISDIR: case ENOTEMPTY: case EINVAL:
    case ENAMETOOLONG: case EPERM:
        break;
    default:
        fs_log(LOG_ERR, "%s", e->msg);
    }
    return err;
}

/* Directory parent and the archive path of its entry name. */
static int resolve(const fs_state *fs, uint64_t parent, const char *name, const fs_node **dir,
                   char path[TF_PATH_MAX + 1])
{
    *dir = fs_tree_by_ino(&fs->tree, parent);
    if (!*dir)
        return ENOENT;
    if (!fs_node_is_dir(*dir))
        return ENOTDIR;
    return fs_tree_child_path(*dir, name, path);
}

/* ---- committing written files ---- */

/* A checkpoint that found references for little of its bytes, where its
 * run has checkpoints, goes to the log. */
static void warn_unmatched(fs_state *fs, const char *path)
{
    const tf_add_report *r = tf_writer_last_report(fs->writer);
    if (!tf_add_report_unmatched(r))
        return;
    char why[256];
    tf_add_report_warning(r, why, sizeof why);
    fs_log(LOG_WARNING, "%s: %s", path, why);
}

/* Where the file `name` in directory a->parent is committed: its archive
 * path and attributes. *took_over: the inode of the regular file it
 * replaces, 0 for none. */
static int place(fs_state *fs, const fs_write_attrs *a, const char *name,
                 char path[TF_PATH_MAX + 1], tf_entry_attrs *ea, uint64_t *took_over)
{
    const fs_node *dir;
    int err = resolve(fs, a->parent, name, &dir, path);
    if (err) {
        fs_log(LOG_ERR, "%s: not committed: its directory is gone", name);
        return err;
    }
    const fs_node *old = fs_tree_child(&fs->tree, dir, name);
    *ea = (tf_entry_attrs){ .ino = a->ino, .mode = a->mode, .mtime = a->mtime };
    if (old && fs_node_is_dir(old))
        return EISDIR;
    if (old && old->ent->kind != TF_ENTRY_SYMLINK)
        ea->ino = *took_over = old->ino;
    else if (fs_tree_by_ino(&fs->tree, ea->ino))
        ea->ino = tf_writer_new_ino(fs->writer); /* never two entries with one inode */
    return 0;
}

/* Commits the spool as the file `name` in directory a->parent; *took_over
 * as place's. */
static int commit_spool(fs_state *fs, int spool, const fs_write_attrs *a, const char *name,
                        uint64_t *took_over)
{
    char path[TF_PATH_MAX + 1];
    tf_entry_attrs ea;
    int err = place(fs, a, name, path, &ea, took_over);
    if (err)
        return err;
    tf_error e;
    if (tf_writer_add_fd(fs->writer, spool, path, NULL, &ea, &e) < 0) {
        fs_log(e.errnum == EINVAL ? LOG_WARNING : LOG_ERR, "%s: not committed: %s", path, e.msg);
        *took_over = 0;
        return errno_of(&e);
    }
    warn_unmatched(fs, path);
    return 0;
}

/* Commits h's changes, if it has any (with unreported, not when its last
 * failure was reported already). Returns 0 or an errno value. */
static int commit_handle(fs_state *fs, fs_handle *h, bool unreported)
{
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    uint64_t took_over = 0;
    int err = 0;
    fs_stream_end(fs, h); /* a stream job still to come has nothing to do */
    pthread_mutex_lock(&h->io); /* no write changes the spool meanwhile */
    if (fs_handles_pending_commit(&fs->handles, h, unreported, &a, name)) {
        err = commit_spool(fs, h->spool, &a, name, &took_over);
        fs_handles_committed(&fs->handles, h, err == 0);
    }
    pthread_mutex_unlock(&h->io);
    if (took_over)
        fs_invalidate_inode(fs, took_over);
    return err;
}

/* Encodes h's file as it is written; when that gives up (or fails), the
 * file's close commits it. */
static void run_stream(fs_state *fs, struct fs_job *j)
{
    fs_handle *h = fs_handles_get(&fs->handles, j->fh, j->ino);
    if (!h || h->serial != j->serial)
        return; /* closed already */
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    char path[TF_PATH_MAX + 1];
    tf_entry_attrs ea;
    uint64_t took_over = 0;
    tf_error e;
    if (fs_handles_pending_commit(&fs->handles, h, false, &a, name) &&
        place(fs, &a, name, path, &ea, &took_over) == 0 &&
        fs_stream_commit(fs, h, j->fh, path, &ea, &e) == 0) {
        warn_unmatched(fs, path);
        if (took_over)
            fs_invalidate_inode(fs, took_over);
    }
    fs_stream_end(fs, h);
}

static void run_commit(fs_state *fs, struct fs_job *j)
{
    fs_handle *h = fs_handles_get(&fs->handles, j->fh, j->ino);
    fuse_reply_err(j->req, h ? commit_handle(fs, h, false) : EBADF);
}

static void run_release(fs_state *fs, struct fs_job *j)
{
    fs_handle *h = fs_handles_get(&fs->handles, j->fh, j->ino);
    if (!h)
        return;
    commit_handle(fs, h, true); /* failures are logged */
    fs_handle_free(fs_handles_take(&fs->handles, j->fh));
}

/* ---- the tree ---- */

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
static int make_entry(fs_state *fs, const struct fs_job *j, uint64_t *ino)
{
    const fs_node *dir;
    char path[TF_PATH_MAX + 1];
    int err = resolve(fs, j->parent, j->name, &dir, path);
    if (err)
        return err;
    if (fs_tree_child(&fs->tree, dir, j->name))
        return EEXIST;
    tf_entry_attrs a = { .ino = tf_writer_new_ino(fs->writer), .mode = j->mode & 07777 };
    tf_time_of_day(&a.mtime);
    tf_error e;
    int rc = j->kind == FS_JOB_MKDIR ? tf_writer_mkdir(fs->writer, path, &a, &e)
                                     : tf_writer_symlink(fs->writer, path, j->target, &a, &e);
    *ino = a.ino;
    return rc < 0 ? failure(&e) : 0;
}

/* unlink and rmdir. */
static int remove_entry(fs_state *fs, const struct fs_job *j)
{
    const fs_node *dir;
    char path[TF_PATH_MAX + 1];
    int err = resolve(fs, j->parent, j->name, &dir, path);
    if (err)
        return err;
    const fs_node *n = fs_tree_child(&fs->tree, dir, j->name);
    bool want_dir = j->kind == FS_JOB_RMDIR;
    if (!n)
        return ENOENT;
    if (fs_node_is_dir(n) != want_dir)
        return want_dir ? ENOTDIR : EISDIR;
    if (want_dir && n->nchildren)
        return ENOTEMPTY;
    uint64_t ino = n->ino;
    if (!want_dir)
        fs_handles_retire(&fs->handles, ino, n->ent);
    tf_error e;
    if (tf_writer_remove(fs->writer, path, &e) < 0)
        return failure(&e);
    fs_handles_unlink_ino(&fs->handles, ino);
    return 0;
}

static int rename_entry(fs_state *fs, const struct fs_job *j)
{
    if (j->flags & ~(unsigned)RENAME_NOREPLACE)
        return EINVAL; /* RENAME_EXCHANGE and RENAME_WHITEOUT are not supported */
    const fs_node *dir, *new_dir;
    char from[TF_PATH_MAX + 1], to[TF_PATH_MAX + 1];
    int err = resolve(fs, j->parent, j->name, &dir, from);
    if (!err)
        err = resolve(fs, j->new_parent, j->new_name, &new_dir, to);
    if (err)
        return err;
    const fs_node *src = fs_tree_child(&fs->tree, dir, j->name);
    const fs_node *dst = fs_tree_child(&fs->tree, new_dir, j->new_name);
    if (dst && (j->flags & RENAME_NOREPLACE))
        return EEXIST;
    if (!src)
        return ENOENT;
    uint64_t src_ino = src->ino, dst_ino = dst ? dst->ino : 0;
    if (dst_ino && dst_ino != src_ino && dst->ent)
        fs_handles_retire(&fs->handles, dst_ino, dst->ent);
    tf_error e;
    if (tf_writer_move(fs->writer, from, to, &e) < 0)
        return failure(&e);
    fs_handles_move_ino(&fs->handles, src_ino, j->new_parent, j->new_name);
    if (dst_ino && dst_ino != src_ino)
        fs_handles_unlink_ino(&fs->handles, dst_ino); /* replaced, as if unlinked */
    return 0;
}

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
    int err = fs_spool_fill(fs, fd, n->ent, keep, &e);
    if (!err && ftruncate(fd, (off_t)size) < 0)
        err = errno;
    if (!err && tf_writer_add_fd(fs->writer, fd, path, NULL, a, &e) < 0)
        err = failure(&e);
    close(fd);
    return err;
}

static int set_attrs(fs_state *fs, const struct fs_job *j)
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
    const char *path = n->ent->path;
    if (j->to_set & FUSE_SET_ATTR_SIZE) {
        if (fs_node_is_dir(n))
            return EISDIR;
        return truncate_file(fs, n, path, (uint64_t)j->attr.st_size, &a);
    }
    tf_error e;
    return tf_writer_set_attrs(fs->writer, path, a.mode, a.mtime, &e) < 0 ? failure(&e) : 0;
}

static void reply_attr(fs_state *fs, fuse_req_t req, int err, uint64_t ino)
{
    struct stat st;
    double timeout;
    if (!err)
        err = fs_attr_of_ino(fs, ino, &st, &timeout);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, timeout);
}

void fs_job_run(fs_state *fs, struct fs_job *j)
{
    uint64_t ino = 0;
    switch (j->kind) {
    case FS_JOB_COMMIT:
        run_commit(fs, j);
        break;
    case FS_JOB_RELEASE:
        run_release(fs, j);
        break;
    case FS_JOB_STREAM:
        run_stream(fs, j);
        break;
    case FS_JOB_MKDIR:
    case FS_JOB_SYMLINK: {
        int err = make_entry(fs, j, &ino);
        reply_new_entry(fs, j->req, err, ino);
        break;
    }
    case FS_JOB_UNLINK:
    case FS_JOB_RMDIR:
        fuse_reply_err(j->req, remove_entry(fs, j));
        break;
    case FS_JOB_RENAME:
        fuse_reply_err(j->req, rename_entry(fs, j));
        break;
    case FS_JOB_SETATTR:
        reply_attr(fs, j->req, set_attrs(fs, j), j->ino);
        break;
    }
    job_free(j);
}
