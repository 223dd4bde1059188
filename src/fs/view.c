#include "fs/view.h"

#include <pthread.h>
#include <stdatomic.h>

ssize_t fs_read_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      uint8_t *out, tf_error *e)
{
    pthread_rwlock_rdlock(&fs->view_lock);
    ssize_t got = tf_reader_pread(fs->reader, ent, off, len, out, e);
    pthread_rwlock_unlock(&fs->view_lock);
    return got;
}

ssize_t fs_view_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      tf_read_view *v, tf_error *e)
{
    pthread_rwlock_rdlock(&fs->view_lock);
    ssize_t got = tf_reader_view(fs->reader, ent, off, len, v, e);
    pthread_rwlock_unlock(&fs->view_lock);
    return got;
}

void fs_invalidate_inode(fs_state *fs, uint64_t ino)
{
    if (atomic_load(&fs->notify))
        fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}
