/* A mounted archive: what every request handler needs.
 *
 * Threads: libfuse's worker threads serve the kernel's requests; a
 * read-write mount also has a committer thread (committer.h) that makes
 * every change to the archive, one after the other, and a read-only one
 * a follow thread (follow.h) that applies the commits others append. The
 * tree, and the archive's catalog and blob table it points into, change
 * only while a commit is applied to them: under view_lock held
 * exclusively (by the writer's update hooks or the follow thread's),
 * while requests hold it shared as they use them. Encoding a commit, or
 * reading one from the archive, takes no lock: reads go on meanwhile. */
#ifndef TRAJFS_FS_FS_H
#define TRAJFS_FS_FS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "fs/committer.h"
#include "fs/follow.h"
#include "fs/fuse_api.h"
#include "fs/handles.h"
#include "fs/options.h"
#include "fs/readahead.h"
#include "fs/readbuf.h"
#include "fs/tree.h"
#include "store/archive.h"
#include "store/prefetch.h"
#include "store/reader.h"
#include "store/writer.h"

typedef struct fs_state {
    tf_archive *ar;
    tf_writer *writer;          /* rw: the archive's single writer; NULL when read-only */
    pthread_rwlock_t view_lock;
    fs_tree tree;
    tf_reader_ctx *reader;      /* one for all threads; its cache is shared */
    tf_prefetch *prefetch;      /* fills reader's cache ahead of reads */
    size_t prefetch_bytes;      /* its window (-o prefetch) */
    fs_readbuf readbuf;
    struct stat archive_st;     /* owner of every file; times of the root */
    bool direct_io;             /* bypass the kernel's page cache */
    struct fuse_session *se;
    _Atomic bool notify;        /* se may be told to drop cached data */
    fs_handles handles;
    fs_committer committer;     /* rw only */
    int spool_dir;              /* rw: descriptor of the spool directory */
    fs_readahead readahead;     /* set at the first lookup */
    double follow;              /* seconds between looks for new commits; 0: none */
    char *archive_path;         /* following: the archive's absolute path */
    fs_follow follower;
} fs_state;

/* Whether the mounted files may change while mounted: then read handles
 * hold copies of their entries. */
static inline bool fs_view_may_change(const fs_state *fs)
{
    return fs->writer || fs->follow > 0;
}

/* Opens the archive of the options: read-only, or with -o rw as its
 * writer (creating it when it does not exist). */
int fs_state_open(fs_state *fs, const fs_options *o, tf_error *e);
/* The session is up (and the daemon forked, if it does: threads started
 * before would stay in the parent): starts the committer or follow thread
 * and the prefetch threads; caches may be invalidated from now on. */
int fs_state_serving(fs_state *fs, struct fuse_session *se, tf_error *e);
/* The session loop ended: runs the changes still queued (the kernel is
 * no longer told about them); a remote archive's fetches under way end
 * (tf_archive_cancel_fetches). */
void fs_state_quiesce(fs_state *fs);
void fs_state_close(fs_state *fs);

#endif
