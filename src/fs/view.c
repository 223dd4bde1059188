#include "fs/view.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "fs/log.h"
#include "fs/spool.h"
#include "store/commit.h"

/* Bytes copied per step when a spool file is filled. */
#define FILL_STEP ((size_t)4 << 20)

/* One read of a file version under the view lock: into out, or, where
 * v is given, as spans. */
static ssize_t read_locked(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                           uint8_t *out, tf_read_spans *v, tf_error *e)
{
    pthread_rwlock_rdlock(&fs->view_lock);
    ssize_t got = v ? tf_reader_pread_spans(fs->reader, ent, off, len, v, e)
                    : tf_reader_pread(fs->reader, ent, off, len, out, e);
    pthread_rwlock_unlock(&fs->view_lock);
    return got;
}

/* Whether ent is still the live entry at its path, with the same
 * chunks. */
static bool still_live(fs_state *fs, const tf_entry *ent)
{
    pthread_rwlock_rdlock(&fs->view_lock);
    const tf_entry *now = tf_archive_lookup(fs->ar, ent->path);
    bool same = now && tf_entry_same_version(ent, now);
    pthread_rwlock_unlock(&fs->view_lock);
    return same;
}

/* How long a following mount keeps looking for the commit after which
 * stored bytes that a read needs were given back, and how often: a
 * remote archive's server may go on answering with the file's old size
 * and ETag for a while after it grew (lighttpd keeps them for a second),
 * its bytes already the new ones. */
#define CATCH_UP_S 3.0
#define CATCH_UP_STEP_NS 100000000L

/* read_locked, once more where a following mount's read failed on
 * stored bytes (EIO) and commits came that it had not applied when the
 * read began: a newer checkpoint's commit may have retired the payload
 * it read, whose space the writer then gave back (a superseded newest,
 * trajfs(5)); applied, the commit serves that blob by its new payload.
 * The follow thread applies them (fs_follow_look_now): with no lock
 * held here, as its hooks take the view lock exclusively. Looked for
 * again, for a remote archive, until CATCH_UP_S. A version
 * that a removal or a replacement left is read by no commit any more:
 * its writer may have given its space back (trajfs(5)), and the error
 * says so rather than that stored bytes are damaged. */
static ssize_t read_view(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                         uint8_t *out, tf_read_spans *v, tf_error *e)
{
    uint64_t applied = fs_follow_applied(&fs->follower);
    ssize_t got = read_locked(fs, ent, off, len, out, v, e);
    double start = tf_monotonic_seconds();
    while (got < 0 && e->errnum == EIO && tf_monotonic_seconds() - start < CATCH_UP_S) {
        if (fs_follow_look_now(&fs->follower, applied)) {
            applied = fs_follow_applied(&fs->follower);
            got = read_locked(fs, ent, off, len, out, v, e);
        } else if (fs_view_may_change(fs) && tf_archive_is_remote(fs->ar)) {
            nanosleep(&(struct timespec){ .tv_nsec = CATCH_UP_STEP_NS }, NULL);
        } else {
            break; /* a local archive's commits show at once */
        }
    }
    if (got < 0 && e->errnum == EIO && fs_view_may_change(fs) && !still_live(fs, ent))
        tf_fail(e, EIO, "%s: removed or replaced in the archive since it was opened, and its "
                "space given back by the archive's writer: this version cannot be read any more",
                ent->path);
    return got;
}

ssize_t fs_read_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      uint8_t *out, tf_error *e)
{
    return read_view(fs, ent, off, len, out, NULL, e);
}

ssize_t fs_view_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      tf_read_spans *v, tf_error *e)
{
    return read_view(fs, ent, off, len, NULL, v, e);
}

int fs_fill_spool(fs_state *fs, int fd, const tf_entry *ent, uint64_t len, tf_error *e)
{
    size_t step = len < FILL_STEP ? (size_t)len : FILL_STEP;
    uint8_t *buf = malloc(step ? step : 1);
    if (!buf)
        return ENOMEM;
    int err = 0;
    for (uint64_t off = 0; off < len && !err; off += step) {
        size_t n = len - off < step ? (size_t)(len - off) : step;
        ssize_t got = fs_read_entry(fs, ent, off, n, buf, e);
        if (got != (ssize_t)n) {
            if (got < 0)
                fs_log_error_once(e->msg);
            err = EIO;
        } else {
            err = -fs_spool_write(fd, buf, n, off);
        }
    }
    free(buf);
    return err;
}

/* ---- a commit is applied ---- */

static bool note_stale(fs_state *fs, uint64_t parent, const char *name, uint64_t old_ino)
{
    if (fs->nstale == fs->stale_cap) {
        size_t cap = fs->stale_cap ? fs->stale_cap * 2 : 16;
        fs_stale_name *n = realloc(fs->stale, cap * sizeof *n);
        if (!n)
            return false;
        fs->stale = n;
        fs->stale_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return false;
    fs->stale[fs->nstale++] = (fs_stale_name){ .parent = parent, .name = copy, .old_ino = old_ino };
    return true;
}

/* Whether seg gives inode ino a live entry (a rename moves it). */
static bool lives_on(const tf_segment *seg, uint64_t ino)
{
    for (uint64_t i = 0; i < seg->nentries; i++)
        if (seg->entries[i].ino == ino && seg->entries[i].kind != TF_ENTRY_TOMBSTONE)
            return true;
    return false;
}

/* The name that ent, about to be applied, changes: a regular file it
 * removes, or replaces by another inode, is kept for the opens and fstat
 * by inode that race with the change (handles.h); a following mount
 * notes the name for the kernel. Only the thread applying commits
 * changes the catalog: it is read here without the view lock. */
static bool note_entry(fs_state *fs, const tf_segment *seg, const tf_entry *ent)
{
    const tf_entry *old = tf_archive_lookup(fs->ar, ent->path);
    if (old && tf_entry_is_regular(old) && (ent->kind == TF_ENTRY_TOMBSTONE || old->ino != ent->ino) &&
        !lives_on(seg, old->ino))
        fs_handles_retire(&fs->handles, old->ino, old);
    if (!fs->follow)
        return true;
    const char *slash = strrchr(ent->path, '/');
    uint64_t parent = FS_ROOT_INO;
    if (slash) {
        char dir[TF_PATH_MAX + 1];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - ent->path), ent->path);
        const tf_entry *d = tf_archive_lookup(fs->ar, dir);
        parent = d && d->kind == TF_ENTRY_DIR ? d->ino : 0;
    }
    if (!parent) /* in a directory new in this commit: nothing of it is cached */
        return true;
    return note_stale(fs, parent, slash ? slash + 1 : ent->path, old ? old->ino : 0);
}

/* Whether seg changes the names in the root directory. */
static bool changes_root(const fs_state *fs, const tf_segment *seg)
{
    for (uint64_t i = 0; i < seg->nentries; i++)
        if (!strchr(seg->entries[i].path, '/') && tf_commit_changes_names(fs->ar, &seg->entries[i]))
            return true;
    return false;
}

static void begin_commit(void *arg, const tf_segment *seg)
{
    fs_state *fs = arg;
    bool noted = true;
    for (uint64_t i = 0; i < seg->nentries && noted; i++)
        noted = note_entry(fs, seg, &seg->entries[i]);
    if (!noted)
        fs_log(LOG_ERR, "out of memory: names changed by a new commit may show their old "
               "version until they leave the kernel's cache");
    /* The root has no entry to take the time of a change of its names
     * (tf_write_opts.dir_times): its times are kept here. */
    bool root_changed = fs->writer && changes_root(fs, seg);
    pthread_rwlock_wrlock(&fs->view_lock);
    if (root_changed)
        tf_time_of_day(&fs->archive_st.st_mtim);
}

/* The tree points into the catalog that just changed: rebuild it. */
static void rebuild_tree(fs_state *fs)
{
    fs_tree fresh;
    tf_error e;
    fs_tree_free(&fs->tree);
    if (fs_tree_build(fs->ar, &fresh, &e) == 0)
        fs->tree = fresh;
    else /* the empty tree answers ENOENT to everything: remount */
        fs_log(LOG_ERR, "cannot rebuild the file tree after a commit: %s", e.msg);
}

/* The names a commit changed, their directories (listing, link count,
 * times), the inodes they held and the root (its times are the
 * archive's): the kernel forgets what it had of them, and asks again.
 * With no lock held: the kernel may need requests served meanwhile. */
static void tell_kernel(fs_state *fs)
{
    fs_invalidate_inode(fs, FS_ROOT_INO);
    for (size_t i = 0; i < fs->nstale; i++) {
        const fs_stale_name *n = &fs->stale[i];
        fs_invalidate_entry(fs, n->parent, n->name);
        fs_invalidate_inode(fs, n->parent);
        if (n->old_ino)
            fs_invalidate_inode(fs, n->old_ino);
        free(n->name);
    }
    fs->nstale = 0;
}

static void end_commit(void *arg)
{
    fs_state *fs = arg;
    rebuild_tree(fs);
    if (!fs->follow) {
        pthread_rwlock_unlock(&fs->view_lock);
        return;
    }
    /* The root's times, and the change time of directories, are those
     * of the archive's last commit (attr.c). */
    struct stat st; /* a remote archive's is dated now */
    if (tf_archive_stat(fs->ar, &st, NULL) == 0)
        fs->archive_st.st_mtim = st.st_mtim;
    pthread_rwlock_unlock(&fs->view_lock);
    tell_kernel(fs);
}

void fs_view_hooks_init(fs_state *fs)
{
    fs->applied = (tf_archive_hooks){ begin_commit, end_commit, fs };
}

void fs_view_hooks_free(fs_state *fs)
{
    free(fs->stale); /* its names went in tell_kernel */
    fs->stale = NULL;
}

void fs_invalidate_inode(fs_state *fs, uint64_t ino)
{
    if (atomic_load(&fs->notify))
        fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

void fs_invalidate_entry(fs_state *fs, uint64_t parent, const char *name)
{
    if (atomic_load(&fs->notify))
        fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
}
