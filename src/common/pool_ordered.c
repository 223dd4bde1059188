/* tf_pool_run_ordered: jobs on a pool, their results sunk in order.
 *
 * A run queues at most one task per pool thread, and each task runs jobs
 * until none is left to claim within the window: a task a job would cost
 * a queueing and a wake-up each, more than the job itself where jobs are
 * small (chunks of 2^10 elements). The calling thread runs the job it
 * waits for itself where no task has claimed it yet, so the run moves on
 * whatever else the pool's threads are busy with; never a later one: a
 * job may wait (for the bytes of a file still being written) while the
 * jobs before it are done and must be sunk (stored). And the run
 * returns once its jobs under way are done, without waiting for its
 * tasks that have not started: the last one out frees the run. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/pool.h"

enum { JOB_WAITING, JOB_DONE, JOB_FAILED };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* the job the sink waits for is done, or,
                               once stopped, the last job under way */
    size_t n, window;
    size_t next;            /* the job to claim next */
    size_t sinking;         /* the job the sink is at; jobs from
                               sinking + window on wait for it */
    bool sink_waits;        /* the sink sleeps until job `sinking` is done */
    unsigned tasks;         /* queued on the pool and not yet returned */
    size_t under_way;       /* jobs claimed and not yet done */
    unsigned refs;          /* the caller and the tasks: the last frees */
    bool stop;              /* no job is claimed any more */
    unsigned char *state;   /* per job */
    tf_error *errors;       /* per job */
    int (*work)(void *, size_t, tf_error *);
    void *arg;
} ordered_run;

/* Claims the next job into *i where the window allows one; the caller
 * holds the lock. */
static bool claim(ordered_run *o, size_t *i)
{
    if (o->stop || o->next >= o->n || o->next >= o->sinking + o->window)
        return false;
    *i = o->next++;
    o->under_way++;
    return true;
}

/* Runs claimed job i without the lock, which the caller holds. */
static void run_job(ordered_run *o, size_t i)
{
    pthread_mutex_unlock(&o->lock);
    int rc = o->work(o->arg, i, &o->errors[i]);
    pthread_mutex_lock(&o->lock);
    o->state[i] = rc == 0 ? JOB_DONE : JOB_FAILED;
    o->under_way--;
    if ((o->sink_waits && i == o->sinking) || (o->stop && !o->under_way))
        pthread_cond_signal(&o->changed);
}

static void run_free(ordered_run *o)
{
    pthread_cond_destroy(&o->changed);
    pthread_mutex_destroy(&o->lock);
    free(o->state);
    free(o->errors);
    free(o);
}

/* Drops a reference to the run, which the caller holds the lock of. */
static void run_release(ordered_run *o)
{
    bool last = !--o->refs;
    pthread_mutex_unlock(&o->lock);
    if (last)
        run_free(o);
}

/* A task on the pool: jobs while there are some to claim. */
static void run_jobs(void *arg)
{
    ordered_run *o = arg;
    size_t i;
    pthread_mutex_lock(&o->lock);
    while (claim(o, &i))
        run_job(o, i);
    o->tasks--;
    run_release(o);
}

/* Queues tasks for the jobs the window now allows, up to one per pool
 * thread; the caller holds the lock. */
static int add_tasks(tf_pool *p, ordered_run *o, tf_error *e)
{
    size_t end = o->sinking + o->window < o->n ? o->sinking + o->window : o->n;
    size_t claimable = end > o->next ? end - o->next : 0;
    while (o->tasks < tf_pool_threads(p) && o->tasks < claimable) {
        if (tf_pool_add(p, run_jobs, o, e) < 0)
            return -1;
        o->tasks++;
        o->refs++;
    }
    return 0;
}

/* Sinks each job in turn once it is done; the caller holds the lock,
 * which a sink runs without. */
static int sink_in_order(tf_pool *p, ordered_run *o,
                         int (*sink)(void *, size_t, tf_error *), tf_error *e)
{
    for (size_t i = 0; i < o->n; i++) {
        o->sinking = i;
        if (add_tasks(p, o, e) < 0)
            return -1;
        size_t mine;
        while (o->state[i] == JOB_WAITING) {
            if (o->next == i && claim(o, &mine)) {
                run_job(o, mine);
                continue;
            }
            o->sink_waits = true;
            pthread_cond_wait(&o->changed, &o->lock);
            o->sink_waits = false;
        }
        if (o->state[i] == JOB_FAILED) {
            *e = o->errors[i];
            return -1;
        }
        if (sink) {
            pthread_mutex_unlock(&o->lock);
            int rc = sink(o->arg, i, e);
            pthread_mutex_lock(&o->lock);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

int tf_pool_run_ordered(tf_pool *p, size_t n, size_t window,
                        int (*work)(void *arg, size_t i, tf_error *e),
                        int (*sink)(void *arg, size_t i, tf_error *e), void *arg, tf_error *e)
{
    for (size_t i = 0; !p && i < n; i++)
        if (work(arg, i, e) < 0 || (sink && sink(arg, i, e) < 0))
            return -1;
    if (!p || n == 0)
        return 0;
    ordered_run *o = calloc(1, sizeof *o);
    if (o) {
        *o = (ordered_run){ .n = n, .window = window ? window : 1, .refs = 1, .work = work,
                            .arg = arg, .state = calloc(n, 1),
                            .errors = calloc(n, sizeof *o->errors) };
        pthread_mutex_init(&o->lock, NULL);
        pthread_cond_init(&o->changed, NULL);
    }
    if (!o || !o->state || !o->errors) {
        if (o)
            run_free(o);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&o->lock);
    int rc = sink_in_order(p, o, sink, e);
    o->stop = true;
    while (o->under_way)
        pthread_cond_wait(&o->changed, &o->lock);
    run_release(o);
    return rc;
}
