#include "fs/fs.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/tmpfile.h"
#include "fs/give_back_job.h"
#include "fs/log.h"
#include "fs/spool.h"
#include "fs/view.h"

/* ---- opening ---- */

/* A read-write mount of an archive that does not exist creates it (one
 * in object storage: unless one is there). */
static int create_if_missing(const fs_options *o, tf_error *e)
{
    const char *archive = o->archive;
    bool url = tf_io_is_url(archive);
    if (!url && (access(archive, F_OK) == 0 || errno != ENOENT))
        return 0;
    tf_error why;
    if (tf_container_create(archive, &o->remote, TF_CHUNK_SHIFT_DEFAULT, TF_FORMAT_DEFAULT, &why) < 0) {
        if (url && why.errnum == EEXIST)
            return 0;
        *e = why;
        return -1;
    }
    char *shown = tf_io_shown_name(archive);
    fs_log(LOG_INFO, "%s: created a new, empty archive", shown ? shown : "the archive");
    free(shown);
    return 0;
}

/* -o spool_dir, or the archive's directory (a URL's: TMPDIR, else
 * /var/tmp). */
static int open_spool_dir(const fs_options *o, tf_error *e)
{
    if (o->spool_dir)
        return fs_spool_open_dir(o->spool_dir, e);
    if (tf_io_is_url(o->archive))
        return fs_spool_open_dir(tf_tmp_dir(), e);
    char *abs = realpath(o->archive, NULL);
    if (!abs)
        return tf_fail(e, errno, "%s: %s", o->archive, strerror(errno));
    int fd = fs_spool_open_dir(dirname(abs), e);
    free(abs);
    return fd;
}

static int open_writable(fs_state *fs, const fs_options *o, tf_error *e)
{
    tf_write_opts wo = o->write;
    wo.applied = &fs->applied;
    wo.open_versions = fs_open_versions;
    wo.open_versions_arg = fs;
    wo.dir_times = true;
    wo.cache_bytes = o->cache_size; /* the mount reads through this cache too */
    wo.whole_catalog = true;
    wo.remote = &o->remote;
    if (create_if_missing(o, e) < 0 ||
        tf_writer_open(o->archive, false, 0, &wo, &fs->writer, e) < 0)
        return -1;
    fs->ar = tf_writer_archive(fs->writer);
    fs->spool_dir = open_spool_dir(o, e);
    return fs->spool_dir < 0 ? -1 : 0;
}

/* A prefetch thread reads the blob table, which a commit changes: it
 * holds the view as a request does. */
static void hold_view(void *arg)
{
    pthread_rwlock_rdlock(&((fs_state *)arg)->view_lock);
}

static void release_view(void *arg)
{
    pthread_rwlock_unlock(&((fs_state *)arg)->view_lock);
}

static int start_prefetch(fs_state *fs)
{
    if (!fs->prefetch_bytes)
        return 0;
    tf_prefetch_guard guard = { hold_view, release_view, fs };
    fs->prefetch = tf_prefetch_new(fs->ar, fs->reader, tf_online_cpus(), fs->prefetch_bytes, &guard);
    return fs->prefetch ? 0 : -1;
}

/* A writable mount reads through its writer's reader: the cache of the
 * parents its commits decode is the one reads use, and cache_size bounds
 * both (a reader of its own would add the writer's 256 MiB). */
static void free_reader(fs_state *fs)
{
    if (!fs->writer)
        tf_reader_free(fs->reader);
    fs->reader = NULL;
}

static void close_archive(fs_state *fs)
{
    if (fs->writer)
        tf_writer_close(fs->writer); /* closes fs->ar */
    else
        tf_archive_close(fs->ar);
    if (fs->spool_dir >= 0)
        close(fs->spool_dir);
    free(fs->archive_path);
    fs_view_hooks_free(fs);
}

/* Writers first: a commit waiting to be applied keeps new readers out,
 * so that a stream of reads cannot hold it off for ever. */
static void init_view_lock(pthread_rwlock_t *lock)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(lock, &attr);
    pthread_rwlockattr_destroy(&attr);
}

int fs_state_open(fs_state *fs, const fs_options *o, tf_error *e)
{
    const char *archive = o->archive;
    *fs = (fs_state){ .direct_io = o->direct_io, .spool_dir = -1, .prefetch_bytes = o->prefetch,
                      .follow = o->follow };
    fs_view_hooks_init(fs);
    int rc = o->rw ? open_writable(fs, o, e)
                   : tf_archive_open(archive,
                                     &(tf_open_opts){ .remote = &o->remote, .lazy_bodies = true,
                                                      .catalog_cache = o->catalog_cache },
                                     &fs->ar, e);
    /* Absolute: the daemon leaves the working directory. */
    if (rc == 0 && fs->follow > 0 && !(fs->archive_path = tf_io_display_name(archive)))
        rc = tf_fail(e, errno, "%s: %s", archive, strerror(errno));
    if (rc < 0) {
        if (fs->writer || fs->ar)
            close_archive(fs);
        return -1;
    }
    /* A remote archive has no owner here: the files are the mounting
     * user's, dated when mounted. */
    if (tf_archive_stat(fs->ar, &fs->archive_st, e) < 0) {
        tf_error_prefix(e, "%s", archive);
        goto fail;
    }
    if (fs_tree_build(fs->ar, &fs->tree, e) < 0) {
        tf_error_prefix(e, "%s", archive);
        goto fail;
    }
    fs->reader = fs->writer ? tf_writer_reader(fs->writer) : tf_reader_new(fs->ar, o->cache_size);
    if (!fs->reader || fs_readbuf_init(&fs->readbuf) < 0) {
        tf_fail(e, ENOMEM, "out of memory");
        goto fail;
    }
    init_view_lock(&fs->view_lock);
    fs_handles_init(&fs->handles);
    return 0;
fail:
    free_reader(fs);
    fs_tree_free(&fs->tree);
    close_archive(fs);
    return -1;
}

int fs_state_serving(fs_state *fs, struct fuse_session *se, tf_error *e)
{
    fs->se = se;
    if (fs->writer && fs_committer_start(&fs->committer, fs) < 0)
        return tf_fail(e, EAGAIN, "cannot start the committer thread");
    if (fs->follow > 0 && fs_follow_start(&fs->follower, fs->ar, &fs->applied, fs->archive_path,
                                          &fs->archive_st, fs->follow) < 0)
        return tf_fail(e, EAGAIN, "cannot start the follow thread");
    if (start_prefetch(fs) < 0)
        return tf_fail(e, EAGAIN, "cannot start the prefetch threads");
    atomic_store(&fs->notify, true);
    return 0;
}

void fs_state_quiesce(fs_state *fs)
{
    /* Served no more: the fetches of the follow thread and of the
     * prefetcher end now, not at a slow server's timeouts. */
    if (fs->ar)
        tf_archive_cancel_fetches(fs->ar);
    atomic_store(&fs->notify, false);
    if (fs->writer)
        fs_committer_stop(&fs->committer);
    fs_follow_stop(&fs->follower);
}

void fs_state_close(fs_state *fs)
{
    fs_state_quiesce(fs);
    size_t lost = fs_handles_destroy(&fs->handles);
    if (lost)
        fs_log(LOG_WARNING, "%zu files open for writing at unmount were never closed: "
               "their changes are not in the archive", lost);
    tf_prefetch_free(fs->prefetch);
    fs_readbuf_destroy(&fs->readbuf);
    free_reader(fs);
    fs_tree_free(&fs->tree);
    close_archive(fs);
    pthread_rwlock_destroy(&fs->view_lock);
}
