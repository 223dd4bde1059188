#include "fs/follow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/log.h"
#include "fs/view.h"

/* ---- a commit is applied ---- */

static bool add_note(fs_follow *f, uint64_t parent, const char *name, uint64_t old_ino)
{
    if (f->nnotes == f->notes_cap) {
        size_t cap = f->notes_cap ? f->notes_cap * 2 : 16;
        fs_follow_note *n = realloc(f->notes, cap * sizeof *n);
        if (!n)
            return false;
        f->notes = n;
        f->notes_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return false;
    f->notes[f->nnotes++] = (fs_follow_note){ .parent = parent, .name = copy, .old_ino = old_ino };
    return true;
}

/* Notes the name that ent, about to be applied, changes. A regular file
 * it removes, or replaces by another inode, is kept for the opens and
 * fstat by inode that race with the change (handles.h). Only this thread
 * changes the catalog: it is read here without the view lock. */
static bool note_entry(fs_follow *f, const tf_entry *ent)
{
    fs_state *fs = f->fs;
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
    const tf_entry *old = tf_archive_lookup(fs->ar, ent->path);
    if (old && tf_entry_is_regular(old) && (ent->kind == TF_ENTRY_TOMBSTONE || old->ino != ent->ino))
        fs_handles_retire(&fs->handles, old->ino, old);
    return add_note(f, parent, slash ? slash + 1 : ent->path, old ? old->ino : 0);
}

static void begin_commit(void *arg, const tf_segment *seg)
{
    fs_follow *f = arg;
    bool noted = true;
    for (uint64_t i = 0; i < seg->nentries && noted; i++)
        noted = note_entry(f, &seg->entries[i]);
    if (!noted)
        fs_log(LOG_ERR, "%s: out of memory: names changed by a new commit may show their old "
               "version until they leave the kernel's cache", f->archive);
    pthread_rwlock_wrlock(&f->fs->view_lock);
}

/* The names a commit changed, their directories (listing, link count,
 * times), the inodes they held and the root (its times are the
 * archive's): the kernel forgets what it had of them, and asks again.
 * With no lock held: the kernel may need requests served meanwhile. */
static void tell_kernel(fs_follow *f)
{
    fs_invalidate_inode(f->fs, FS_ROOT_INO);
    for (size_t i = 0; i < f->nnotes; i++) {
        const fs_follow_note *n = &f->notes[i];
        fs_invalidate_entry(f->fs, n->parent, n->name);
        fs_invalidate_inode(f->fs, n->parent);
        if (n->old_ino)
            fs_invalidate_inode(f->fs, n->old_ino);
        free(n->name);
    }
    f->nnotes = 0;
}

static void end_commit(void *arg)
{
    fs_follow *f = arg;
    fs_state *fs = f->fs;
    fs_view_rebuild(fs);
    /* The root's times, and the change time of directories, are those
     * of the archive's last commit (attr.c). */
    struct stat st; /* a remote archive's is dated now */
    if (tf_archive_stat(fs->ar, &st, NULL) == 0)
        fs->archive_st.st_mtim = st.st_mtim;
    pthread_rwlock_unlock(&fs->view_lock);
    tell_kernel(f);
}

/* ---- the thread ---- */

/* (A remote archive replaced is refused by its reads: io/remote.h.) */
static void warn_if_replaced(fs_follow *f)
{
    if (f->told_replaced || tf_archive_is_remote(f->fs->ar))
        return;
    struct stat named;
    const struct stat *held = &f->fs->archive_st;
    if (stat(f->archive, &named) == 0 && named.st_dev == held->st_dev &&
        named.st_ino == held->st_ino)
        return;
    f->told_replaced = true;
    fs_log(LOG_WARNING, "%s was replaced or removed (by trajpack gc?): this mount serves the "
           "archive it opened, without its later commits; remount to see them", f->archive);
}

static void look_once(fs_follow *f)
{
    tf_archive_hooks hooks = { begin_commit, end_commit, f };
    bool changed;
    tf_error e;
    if (tf_archive_refresh(f->fs->ar, &hooks, &changed, &e) < 0) {
        char msg[sizeof e.msg + 128];
        snprintf(msg, sizeof msg, "%s: new commits not applied: %s", f->archive, e.msg);
        fs_log_error_once(msg);
    }
    warn_if_replaced(f);
    if (f->trace) /* an event tests wait for: a look that began after they changed the archive */
        fprintf(stderr, "trajfs: %s: follow: look %lu done\n", f->archive, ++f->looks);
}

static void *follow_main(void *arg)
{
    fs_follow *f = arg;
    pthread_mutex_lock(&f->lock);
    while (!f->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += f->interval.tv_sec;
        until.tv_nsec += f->interval.tv_nsec;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!f->stopping && pthread_cond_timedwait(&f->wake, &f->lock, &until) != ETIMEDOUT)
            ;
        if (f->stopping)
            break;
        pthread_mutex_unlock(&f->lock);
        look_once(f);
        pthread_mutex_lock(&f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int fs_follow_start(fs_follow *f, fs_state *fs, const char *archive, double seconds)
{
    time_t whole = (time_t)seconds;
    *f = (fs_follow){
        .fs = fs,
        .archive = archive,
        .interval = { .tv_sec = whole, .tv_nsec = (long)((seconds - (double)whole) * 1e9) },
        .trace = getenv("TRAJFS_FOLLOW_TRACE") != NULL,
    };
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&f->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&f->lock, NULL);
    if (pthread_create(&f->thread, NULL, follow_main, f) != 0) {
        pthread_cond_destroy(&f->wake);
        pthread_mutex_destroy(&f->lock);
        return -1;
    }
    f->running = true;
    return 0;
}

void fs_follow_stop(fs_follow *f)
{
    if (!f->running)
        return;
    pthread_mutex_lock(&f->lock);
    f->stopping = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->lock);
    free(f->notes);
    f->running = false;
}
