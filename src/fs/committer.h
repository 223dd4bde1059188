/* The committer thread of a read-write mount: runs jobs one at a time,
 * in the order they were queued, off libfuse's worker threads, so that
 * while a large file is encoded the workers go on serving other
 * requests. Every change to the archive is such a job (commit_jobs.h,
 * tree_jobs.h); each replies to its request itself.
 *
 * A job may wait for something besides the queue (the stream job waits
 * for the bytes of a file being written): it then says how to wake it,
 * and the committer does when another job is queued behind it or the
 * committer stops, so that no job waits for a file being written. */
#ifndef TRAJFS_FS_COMMITTER_H
#define TRAJFS_FS_COMMITTER_H

#include <pthread.h>
#include <stdbool.h>

typedef struct fs_job fs_job;
/* A job: the queue's link and what runs it (and frees it). A job is the
 * first member of a struct with the rest of what it needs. */
struct fs_job {
    fs_job *next;
    void (*run)(fs_job *job, void *ctx);
};

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t queued;
    fs_job *head, *tail;
    bool stopping, running;
    void *ctx;                     /* given to every job's run */
    void (*give_way)(void *arg);   /* the running job's waker, or NULL */
    void *give_way_arg;
} fs_committer;

/* Starts the thread; 0, or -1 when it cannot. */
int fs_committer_start(fs_committer *c, void *ctx);
void fs_committer_push(fs_committer *c, fs_job *job);
/* Runs the jobs still queued, then ends the thread. */
void fs_committer_stop(fs_committer *c);

/* For the running job, before it waits for something other than the
 * queue: give_way(arg) is called when a job is queued behind it or the
 * committer stops, at once when that happened already (under the
 * committer's lock: give_way must take no lock that is held while jobs
 * are queued). NULL once it no longer waits. */
void fs_committer_on_waiting(fs_committer *c, void (*give_way)(void *arg), void *arg);

#endif
