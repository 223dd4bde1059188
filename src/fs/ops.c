#include "fs/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/attr.h"
#include "fs/give_back_job.h"
#include "fs/log.h"
#include "fs/open_reply.h"
#include "fs/ops_write.h"
#include "fs/state.h"
#include "fs/view.h"

/* Bounds on the sizes the kernel asks for; it never asks for more than
 * max_pages (at most a few MiB) per read or a page or so per readdir. */
#define READ_MAX ((size_t)64 << 20)
#define READDIR_MAX ((size_t)1 << 20)

static fs_state *state_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static bool is_regular(const fs_node *n)
{
    return n->ent && tf_entry_is_regular(n->ent);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    fs_state *fs = userdata;
    /* name_to_handle_at / open_by_handle_at, which NFS servers need:
     * the kernel then looks handles up with "." and "..". */
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    else
        fs_log(LOG_WARNING, "the kernel offers no export support: no NFS export");
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS; /* a link's target never changes */
    /* Pages are dropped when the content of an inode changes (by a commit
     * of a read-write mount), not when attributes expire. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (fs->writer) {
        /* open(O_TRUNC) as one request: a write handle starts empty. */
        if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
            conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
        /* Every write must be in the spool when close() commits it. */
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    }
}

/* Besides names in directories, answers "." on any inode and ".." on a
 * directory: that is how the kernel turns a file handle back into an
 * inode it has forgotten (export support). Files being written have no
 * name until their first commit. */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_state *fs = state_of(req);
    fs_readahead_apply(&fs->readahead);
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *dir = fs_tree_by_ino(&fs->tree, parent);
    int err = 0;
    if (!dir)
        err = ENOENT;
    else if (strlen(name) > TF_NAME_MAX)
        err = ENAMETOOLONG;
    else if (!fs_node_is_dir(dir) && strcmp(name, ".") != 0)
        err = ENOTDIR;
    struct fuse_entry_param ep;
    if (!err) {
        const fs_node *n;
        if (strcmp(name, ".") == 0)
            n = dir;
        else if (strcmp(name, "..") == 0)
            n = fs_tree_parent(&fs->tree, dir);
        else
            n = fs_tree_child(&fs->tree, dir, name);
        if (n)
            fs_entry_of_node(fs, n, &ep);
        else /* inode 0: the kernel remembers the name is absent (in a
              * read-write mount not at all) */
            ep = (struct fuse_entry_param){ .entry_timeout = fs->writer ? 0 : fs_cache_timeout(fs) };
    }
    /* Replied before a commit can be applied: the kernel then gets this
     * answer before it is told to forget it (follow.h). */
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_entry(req, &ep);
    pthread_rwlock_unlock(&fs->view_lock);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    double timeout;
    int err = fs_attr_of_ino(state_of(req), ino, &st, &timeout);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    fs_state *fs = state_of(req);
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    if (!n || !n->ent || n->ent->kind != TF_ENTRY_SYMLINK)
        fuse_reply_err(req, n ? EINVAL : ENOENT);
    else
        fuse_reply_readlink(req, n->ent->target);
    pthread_rwlock_unlock(&fs->view_lock);
}

static bool wants_write(const struct fuse_file_info *fi)
{
    return (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
}

/* A read handle holds the version of the file it opened. */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    if (wants_write(fi)) {
        if (fs->writer)
            fs_open_for_writing(req, ino, fi);
        else
            fuse_reply_err(req, EROFS);
        return;
    }
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    int err = !n ? ENOENT : !is_regular(n) ? (fs_node_is_dir(n) ? EISDIR : EINVAL) : 0;
    /* Where commits change the catalog's entries: a copy. */
    fs_handle *h = err ? NULL : fs_handle_new_read(ino, n->ent, fs_view_may_change(fs));
    pthread_rwlock_unlock(&fs->view_lock);
    /* Removed since the kernel looked its name up: the version it had. */
    if (err == ENOENT && fs_view_may_change(fs) && (h = fs_handles_open_retired(&fs->handles, ino)))
        err = 0;
    if (err || !h) {
        fuse_reply_err(req, err ? err : ENOMEM);
        return;
    }
    fi->noflush = 1;
    fs_reply_open(req, h, fi);
}

/* A failed read of a stored file fails the reads that touch the damaged
 * or unreadable chunk, nothing else; its message names the file and the
 * tensor. */
static int read_error(const tf_error *e)
{
    fs_log_error_once(e->msg);
    return e->errnum == ENOMEM ? ENOMEM : EIO;
}

/* Replies to a read of a stored file from where its bytes lie, without
 * copying them: the cache's blocks and the entry's bytes go to the kernel
 * in one writev. False when the read has too many pieces for that. */
static bool reply_in_place(fuse_req_t req, fs_state *fs, const fs_handle *h, uint64_t off,
                           size_t size)
{
    tf_read_spans v = { 0 };
    tf_error e = { 0 };
    ssize_t got = fs_view_entry(fs, h->ent, off, size, &v, &e);
    bool done = got >= 0 || e.errnum != E2BIG;
    if (got < 0 && done)
        fuse_reply_err(req, read_error(&e));
    else if (got == 0)
        fuse_reply_buf(req, NULL, 0);
    else if (got > 0)
        fuse_reply_iov(req, v.iov, (int)v.n);
    tf_reader_release_spans(fs->reader, &v);
    tf_read_spans_free(&v);
    return done;
}

static ssize_t read_handle(fs_state *fs, fs_handle *h, uint64_t off, size_t size, uint8_t *buf)
{
    if (h->writable) {
        size_t got;
        int err = fs_handle_read(h, buf, size, off, &got);
        return err ? -err : (ssize_t)got;
    }
    tf_error e = { 0 };
    ssize_t got = fs_read_entry(fs, h->ent, off, size, buf, &e);
    return got >= 0 ? got : -read_error(&e);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    fs_handle *h = fs_handles_get(&fs->handles, fi->fh, ino);
    if (!h) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (off < 0 || size > READ_MAX) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (!h->writable) {
        tf_prefetch_read(fs->prefetch, h->ent, &h->ahead, (uint64_t)off, size);
        if (reply_in_place(req, fs, h, (uint64_t)off, size))
            return;
    }
    uint8_t *buf = fs_readbuf_get(&fs->readbuf, size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ssize_t got = read_handle(fs, h, (uint64_t)off, size, buf);
    if (got < 0)
        fuse_reply_err(req, (int)-got);
    else
        fuse_reply_buf(req, (const char *)buf, (size_t)got);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    fs_handle *h = fs_handles_get(&fs->handles, fi->fh, ino);
    if (h && h->writable) {
        fs_release_writing(req, ino, fi);
        return;
    }
    fs_handle_free(fs_handles_take(&fs->handles, h ? fi->fh : 0));
    fuse_reply_err(req, 0);
    if (fs->writer)
        fs_queue_give_back(fs); /* what only it read, if anything */
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    int err = !n ? ENOENT : !fs_node_is_dir(n) ? ENOTDIR : 0;
    pthread_rwlock_unlock(&fs->view_lock);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    if (!fs->writer) { /* listings change only as the follow thread says */
        fi->cache_readdir = 1;
        fi->keep_cache = 1;
    }
    fuse_reply_open(req, fi);
}

/* Entry k of a directory listing: ".", "..", then the children in name
 * order. NULL past the end. */
static const fs_node *listing_entry(const fs_tree *t, const fs_node *dir, uint64_t k,
                                    const char **name)
{
    const fs_node *n;
    switch (k) {
    case 0:
        *name = ".";
        return dir;
    case 1:
        *name = "..";
        return fs_tree_parent(t, dir);
    default:
        n = fs_tree_nth_child(t, dir, k - 2);
        *name = n ? n->name : NULL;
        return n;
    }
}

/* Fills buf (size bytes) with the listing of dir from position off;
 * returns the bytes used. */
static size_t fill_listing(fuse_req_t req, const fs_state *fs, const fs_node *dir, char *buf,
                           size_t size, off_t off, bool plus)
{
    size_t used = 0;
    const char *name;
    const fs_node *n;
    for (uint64_t k = (uint64_t)off; (n = listing_entry(&fs->tree, dir, k, &name)); k++) {
        struct fuse_entry_param ep;
        fs_entry_of_node(fs, n, &ep);
        size_t need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &ep, (off_t)k + 1)
                           : fuse_add_direntry(req, buf + used, size - used, name, &ep.attr, (off_t)k + 1);
        if (need > size - used)
            break;
        used += need;
    }
    return used;
}

/* readdir and readdirplus: offsets are listing positions, so a listing
 * resumes where the last reply ended. */
static void reply_listing(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    fs_state *fs = state_of(req);
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (size > READDIR_MAX)
        size = READDIR_MAX;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *dir = fs_tree_by_ino(&fs->tree, ino);
    int err = !dir ? ENOENT : !fs_node_is_dir(dir) ? ENOTDIR : 0;
    size_t used = err ? 0 : fill_listing(req, fs, dir, buf, size, off, plus);
    /* Under the lock, as a lookup's: readdirplus makes the kernel's
     * entries too. */
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, used);
    pthread_rwlock_unlock(&fs->view_lock);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    reply_listing(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    reply_listing(req, ino, size, off, true);
}

/* The files' total size as used blocks; a read-write mount also reports
 * the free space of the archive's file system, where commits go. */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    fs_state *fs = state_of(req);
    const unsigned long frsize = 4096;
    pthread_rwlock_rdlock(&fs->view_lock);
    struct statvfs st = {
        .f_bsize = 1u << 20,
        .f_frsize = frsize,
        .f_blocks = (fsblkcnt_t)((fs->tree.total_bytes + frsize - 1) / frsize),
        .f_files = (fsfilcnt_t)fs->tree.nnodes,
        .f_namemax = TF_NAME_MAX,
    };
    pthread_rwlock_unlock(&fs->view_lock);
    uint64_t free_bytes;
    if (fs->writer && tf_archive_free_space(fs->ar, &free_bytes, NULL) == 0) {
        st.f_bfree = st.f_bavail = (fsblkcnt_t)(free_bytes / frsize);
        st.f_blocks += st.f_bfree;
    }
    fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .statfs = op_statfs,
    /* changes, in a read-write mount (EROFS otherwise) */
    .create = fs_op_create,
    .write = fs_op_write,
    .flush = fs_op_flush,
    .fsync = fs_op_fsync,
    .fsyncdir = fs_op_fsyncdir,
    .setattr = fs_op_setattr,
    .mkdir = fs_op_mkdir,
    .symlink = fs_op_symlink,
    .unlink = fs_op_unlink,
    .rmdir = fs_op_rmdir,
    .rename = fs_op_rename,
    .link = fs_op_link,
    .mknod = fs_op_mknod,
};
