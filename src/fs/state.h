/* A mounted archive: what every request handler needs (fs.h opens and
 * closes it).
 *
 * Threads: libfuse's worker threads serve the kernel's requests; a
 * read-write mount also has a committer thread (committer.h) that makes
 * every change to the archive, one after the other, and a read-only one
 * may have a follow thread (follow.h) that applies the commits others
 * append. The tree, and the archive's catalog and blob table it points
 * into, change only while a commit is applied to them: under view_lock
 * held exclusively (by the hooks of view.h, which both threads' commits
 * call), while requests hold it shared as they use them. Encoding a
 * commit, or reading one from the archive, takes no lock: reads go on
 * meanwhile.
 *
 * Following a read() and a close() of a written file through the code:
 * ops.c op_read finds the handle (handles.h) and reads its spool
 * (fs_handle_read) or, for a read handle, the version it opened
 * (view.h, store/reader.h). close() sends a flush: ops_write.c
 * fs_op_flush marks the file closed for its stream (stream_state.h) and
 * queues a commit job (commit_jobs.c), which the committer thread
 * (committer.c) runs: it holds the spool (fs_handle_hold), adds it to
 * the archive (store/writer.h), whose commit calls view.h's hooks to
 * rebuild the tree, then replies to the flush. The last close sends a
 * release: the handle leaves the table, and a release job commits what
 * is left and frees it. */
#ifndef TRAJFS_FS_STATE_H
#define TRAJFS_FS_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs/committer.h"
#include "fs/follow.h"
#include "fs/fuse_api.h"
#include "fs/handles.h"
#include "fs/readahead.h"
#include "fs/readbuf.h"
#include "fs/tree.h"
#include "store/archive.h"
#include "store/prefetch.h"
#include "store/reader.h"
#include "store/writer.h"

/* A name or inode of which the kernel may hold an old version: a
 * following mount tells the kernel to forget it once a commit of others
 * is applied. */
typedef struct {
    uint64_t parent;  /* directory inode of `name` */
    char *name;
    uint64_t old_ino; /* what `name` was before the commit; 0: nothing */
} fs_stale_name;

typedef struct fs_state {
    tf_archive *ar;
    tf_writer *writer;          /* rw: the archive's single writer; NULL when read-only */
    pthread_rwlock_t view_lock;
    fs_tree tree;
    tf_archive_hooks applied;   /* view.h's, around each commit applied */
    fs_stale_name *stale;       /* following: of the commit being applied */
    size_t nstale, stale_cap;
    tf_reader_ctx *reader;      /* one for all threads; its cache is shared */
    tf_prefetch *prefetch;      /* fills reader's cache ahead of reads */
    size_t prefetch_bytes;      /* its window (-o prefetch) */
    fs_readbuf readbuf;
    struct stat archive_st;     /* owner of every file; times of the root
                                 * (rw: then of the last change of its names) */
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

#endif
