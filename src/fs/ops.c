#include "fs/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/fs.h"
#include "fs/log.h"

/* The archive cannot change under a read-only mount: the kernel may keep
 * names and attributes as long as it likes (a day, then it asks again). */
#define CACHE_TIMEOUT 86400.0
/* st_blksize, the I/O size tools like cp and cat prefer: large reads
 * mean fewer requests for the same chunks. */
#define PREFERRED_IO (1u << 20)
/* Bounds on the sizes the kernel asks for; it never asks for more than
 * max_pages (at most a few MiB) per read or a page or so per readdir. */
#define READ_MAX ((size_t)64 << 20)
#define READDIR_MAX ((size_t)1 << 20)

static fs_state *state_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static mode_t type_bits(const fs_node *n)
{
    if (fs_node_is_dir(n))
        return S_IFDIR;
    return n->ent->kind == TF_ENTRY_SYMLINK ? S_IFLNK : S_IFREG;
}

static bool is_regular(const fs_node *n)
{
    return n->ent && (n->ent->kind == TF_ENTRY_FILE || n->ent->kind == TF_ENTRY_SAFETENSORS);
}

/* Attributes come from the catalog alone; owners from the archive file. */
static void fill_attr(const fs_state *fs, const fs_node *n, struct stat *st)
{
    *st = (struct stat){
        .st_ino = n->ino,
        .st_uid = fs->archive_st.st_uid,
        .st_gid = fs->archive_st.st_gid,
        .st_blksize = PREFERRED_IO,
        .st_nlink = fs_node_is_dir(n) ? 2 + n->nsubdirs : 1,
    };
    if (!n->ent) {
        st->st_mode = S_IFDIR | 0755;
        st->st_mtim = st->st_ctim = st->st_atim = fs->archive_st.st_mtim;
        return;
    }
    st->st_mode = type_bits(n) | (n->ent->mode & 07777);
    st->st_size = fs_node_is_dir(n) ? 0 : (off_t)n->ent->size;
    st->st_blocks = (blkcnt_t)((n->ent->size + 511) / 512);
    st->st_mtim = (struct timespec){ .tv_sec = n->ent->mtime_sec, .tv_nsec = n->ent->mtime_nsec };
    st->st_ctim = st->st_atim = st->st_mtim;
}

/* Inode numbers are never reused, so the generation is always 0 and a
 * file handle (inode, generation) stays valid across remounts. */
static void fill_entry(const fs_state *fs, const fs_node *n, struct fuse_entry_param *ep)
{
    *ep = (struct fuse_entry_param){
        .ino = n->ino,
        .attr_timeout = CACHE_TIMEOUT,
        .entry_timeout = CACHE_TIMEOUT,
    };
    fill_attr(fs, n, &ep->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* name_to_handle_at / open_by_handle_at, which NFS servers need:
     * the kernel then looks handles up with "." and "..". */
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    else
        fs_log(LOG_WARNING, "the kernel offers no export support: no NFS export");
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    /* Files never change: no need to drop pages when attributes expire. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

/* Besides names in directories, answers "." on any inode and ".." on a
 * directory: that is how the kernel turns a file handle back into an
 * inode it has forgotten (export support). */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_state *fs = state_of(req);
    const fs_node *dir = fs_tree_by_ino(&fs->tree, parent);
    int err = 0;
    if (!dir)
        err = ENOENT;
    else if (strlen(name) > TF_NAME_MAX)
        err = ENAMETOOLONG;
    else if (!fs_node_is_dir(dir) && strcmp(name, ".") != 0)
        err = ENOTDIR;
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    const fs_node *n;
    if (strcmp(name, ".") == 0)
        n = dir;
    else if (strcmp(name, "..") == 0)
        n = fs_tree_parent(&fs->tree, dir);
    else
        n = fs_tree_child(&fs->tree, dir, name);
    struct fuse_entry_param ep;
    if (n) {
        fill_entry(fs, n, &ep);
    } else {
        /* Inode 0 with a timeout: the kernel remembers the name is absent. */
        ep = (struct fuse_entry_param){ .ino = 0, .entry_timeout = CACHE_TIMEOUT };
    }
    fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    fs_state *fs = state_of(req);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    if (!n) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct stat st;
    fill_attr(fs, n, &st);
    fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    const fs_node *n = fs_tree_by_ino(&state_of(req)->tree, ino);
    if (!n || !n->ent || n->ent->kind != TF_ENTRY_SYMLINK)
        fuse_reply_err(req, n ? EINVAL : ENOENT);
    else
        fuse_reply_readlink(req, n->ent->target);
}

static bool wants_write(const struct fuse_file_info *fi)
{
    return (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    if (!n) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (!is_regular(n)) {
        fuse_reply_err(req, fs_node_is_dir(n) ? EISDIR : EINVAL);
        return;
    }
    if (wants_write(fi)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    /* Files are immutable: pages read before stay valid across opens. */
    if (fs->direct_io)
        fi->direct_io = 1;
    else
        fi->keep_cache = 1;
    fi->noflush = 1;
    fi->fh = fs_tree_index(&fs->tree, n);
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    fs_state *fs = state_of(req);
    const fs_node *n = fs_tree_by_index(&fs->tree, fi->fh);
    if (!n || n->ino != ino || !is_regular(n)) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (off < 0 || size > READ_MAX) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    uint8_t *buf = fs_readbuf_get(&fs->readbuf, size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    tf_error e = { 0 };
    ssize_t got = tf_reader_pread(fs->reader, n->ent, (uint64_t)off, size, buf, &e);
    if (got < 0) {
        /* A damaged or unreadable chunk fails the reads that touch it,
         * nothing else; its message names the file and the tensor. */
        fs_log_error_once(e.msg);
        fuse_reply_err(req, e.errnum == ENOMEM ? ENOMEM : EIO);
        return;
    }
    fuse_reply_buf(req, (const char *)buf, (size_t)got);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    const fs_node *n = fs_tree_by_ino(&state_of(req)->tree, ino);
    if (!n || !fs_node_is_dir(n)) {
        fuse_reply_err(req, n ? ENOTDIR : ENOENT);
        return;
    }
    /* Listings never change either. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
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

/* readdir and readdirplus: offsets are listing positions, so a listing
 * resumes where the last reply ended. */
static void reply_listing(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    fs_state *fs = state_of(req);
    const fs_node *dir = fs_tree_by_ino(&fs->tree, ino);
    if (!dir || !fs_node_is_dir(dir)) {
        fuse_reply_err(req, dir ? ENOTDIR : ENOENT);
        return;
    }
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
    size_t used = 0;
    const char *name;
    const fs_node *n;
    for (uint64_t k = (uint64_t)off; (n = listing_entry(&fs->tree, dir, k, &name)); k++) {
        struct fuse_entry_param ep;
        fill_entry(fs, n, &ep);
        size_t need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &ep, (off_t)k + 1)
                           : fuse_add_direntry(req, buf + used, size - used, name, &ep.attr, (off_t)k + 1);
        if (need > size - used)
            break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
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

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    fs_state *fs = state_of(req);
    const unsigned long frsize = 4096;
    struct statvfs st = {
        .f_bsize = PREFERRED_IO,
        .f_frsize = frsize,
        .f_blocks = (fsblkcnt_t)((fs->total_bytes + frsize - 1) / frsize),
        .f_files = (fsfilcnt_t)fs->tree.nnodes,
        .f_namemax = TF_NAME_MAX,
    };
    fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .statfs = op_statfs,
};
