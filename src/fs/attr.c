#include "fs/attr.h"

#include <errno.h>

/* st_blksize, the I/O size tools like cp and cat prefer: large requests
 * mean fewer of them for the same chunks. */
#define PREFERRED_IO (1u << 20)
#define READ_ONLY_TIMEOUT 86400.0
#define READ_WRITE_TIMEOUT 1.0

double fs_cache_timeout(const fs_state *fs)
{
    return fs->writer ? READ_WRITE_TIMEOUT : READ_ONLY_TIMEOUT;
}

static mode_t type_bits(const fs_node *n)
{
    if (fs_node_is_dir(n))
        return S_IFDIR;
    return n->ent->kind == TF_ENTRY_SYMLINK ? S_IFLNK : S_IFREG;
}

static bool later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}

/* Owners come from the archive file. */
static struct stat common_attr(const fs_state *fs, uint64_t ino)
{
    return (struct stat){
        .st_ino = ino,
        .st_uid = fs->archive_st.st_uid,
        .st_gid = fs->archive_st.st_gid,
        .st_blksize = PREFERRED_IO,
        .st_nlink = 1,
    };
}

void fs_attr_of_node(const fs_state *fs, const fs_node *n, struct stat *st)
{
    *st = common_attr(fs, n->ino);
    if (fs_node_is_dir(n))
        st->st_nlink = 2 + n->nsubdirs;
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
    /* A directory's change time is at least that of the archive's last
     * commit, which may have changed its entries: NFS servers and clients
     * see new entries by it. */
    if (fs_node_is_dir(n) && !fs->writer && later(&fs->archive_st.st_mtim, &st->st_ctim))
        st->st_ctim = fs->archive_st.st_mtim;
}

/* Inode numbers are never reused, so the generation is always 0 and a
 * file handle (inode, generation) stays valid across remounts. */
void fs_entry_of_node(const fs_state *fs, const fs_node *n, struct fuse_entry_param *ep)
{
    double timeout = fs_cache_timeout(fs);
    *ep = (struct fuse_entry_param){ .ino = n->ino, .attr_timeout = timeout,
                                     .entry_timeout = timeout };
    fs_attr_of_node(fs, n, &ep->attr);
}

void fs_attr_of_writing(const fs_state *fs, const fs_write_attrs *a, struct stat *st)
{
    *st = common_attr(fs, a->ino);
    st->st_mode = S_IFREG | (a->mode & 07777);
    st->st_size = (off_t)a->size;
    st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
    st->st_mtim = st->st_ctim = st->st_atim = a->mtime;
}

void fs_entry_of_writing(const fs_state *fs, const fs_write_attrs *a, struct fuse_entry_param *ep)
{
    *ep = (struct fuse_entry_param){ .ino = a->ino };
    fs_attr_of_writing(fs, a, &ep->attr);
}

int fs_attr_of_ino(fs_state *fs, uint64_t ino, struct stat *st, double *timeout)
{
    fs_write_attrs w;
    if (fs->writer && fs_handles_attrs(&fs->handles, ino, &w)) {
        fs_attr_of_writing(fs, &w, st);
        *timeout = 0;
        return 0;
    }
    pthread_rwlock_rdlock(&fs->view_lock);
    const fs_node *n = fs_tree_by_ino(&fs->tree, ino);
    if (n)
        fs_attr_of_node(fs, n, st);
    pthread_rwlock_unlock(&fs->view_lock);
    *timeout = fs_cache_timeout(fs);
    /* A file replaced (a rename over it) or removed while open: fstat of
     * its descriptor gives the version it reads, with no link, as on a
     * local file system. */
    if (!n && fs_view_may_change(fs) && fs_handles_read_attrs(&fs->handles, ino, &w)) {
        fs_attr_of_writing(fs, &w, st);
        st->st_nlink = 0;
        *timeout = 0;
        return 0;
    }
    return n ? 0 : ENOENT;
}
