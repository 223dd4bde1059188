/* The committer thread of a read-write mount. Every change to the archive
 * (the commit of a written file, and every other change of the tree) is a
 * job (mutate.h) that it runs, one at a time and in the order the
 * requests came, off libfuse's worker threads: while a large file is
 * encoded, the workers go on serving other requests. Each job replies to
 * its request itself. */
#ifndef TRAJFS_FS_COMMITTER_H
#define TRAJFS_FS_COMMITTER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fs_state;
typedef struct fs_job fs_job;

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t progress; /* for a job that waits for a file being
                              * written: a job queued, a write, stopping */
    fs_job *head, *tail;
    bool stopping, running;
    struct fs_state *fs;
} fs_committer;

int fs_committer_start(fs_committer *c, struct fs_state *fs);
void fs_committer_push(fs_committer *c, fs_job *job);
/* Runs the jobs still queued, then ends the thread. */
void fs_committer_stop(fs_committer *c);

/* For the running job, when it waits for a file being written (handle
 * fh), under c->lock: */
typedef enum {
    FS_QUEUED_NOTHING,
    FS_QUEUED_CLOSE, /* a flush, fsync or release of fh: its file is complete */
    FS_QUEUED_OTHER, /* other jobs only, which must not wait for that file */
} fs_queued;
fs_queued fs_committer_queued(const fs_committer *c, uint64_t fh);
/* Waits for progress (c->lock held); fs_committer_progress wakes it. */
void fs_committer_wait(fs_committer *c);
void fs_committer_progress(fs_committer *c);

#endif
