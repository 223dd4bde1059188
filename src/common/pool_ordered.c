/* tf_pool_run_ordered: jobs on a pool, their results sunk in order. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/pool.h"

enum { JOB_WAITING, JOB_DONE, JOB_FAILED };

/* One run's jobs; each task queued on the pool runs the next job. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job done, or a task returned */
    size_t next;            /* the job the next task runs */
    size_t returned;        /* tasks that returned */
    bool stop;              /* tasks left run no job */
    unsigned char *state;   /* per job */
    tf_error *errors;       /* per job */
    int (*work)(void *, size_t, tf_error *);
    void *arg;
} ordered_run;

static void run_next_job(void *arg)
{
    ordered_run *o = arg;
    pthread_mutex_lock(&o->lock);
    size_t i = o->next++;
    bool skip = o->stop;
    pthread_mutex_unlock(&o->lock);
    int rc = skip ? 0 : o->work(o->arg, i, &o->errors[i]);
    pthread_mutex_lock(&o->lock);
    if (!skip)
        o->state[i] = rc == 0 ? JOB_DONE : JOB_FAILED;
    o->returned++;
    pthread_cond_broadcast(&o->changed);
    pthread_mutex_unlock(&o->lock);
}

/* Queues the jobs the window allows and sinks each in turn; *queued
 * counts the tasks queued. */
static int sink_in_order(tf_pool *p, ordered_run *o, size_t n, size_t window,
                         int (*sink)(void *, size_t, tf_error *), size_t *queued, tf_error *e)
{
    for (size_t i = 0; i < n; i++) {
        for (; *queued < n && *queued < i + window; ++*queued)
            if (tf_pool_add(p, run_next_job, o, e) < 0)
                return -1;
        pthread_mutex_lock(&o->lock);
        while (o->state[i] == JOB_WAITING)
            pthread_cond_wait(&o->changed, &o->lock);
        bool failed = o->state[i] == JOB_FAILED;
        pthread_mutex_unlock(&o->lock);
        if (failed) {
            *e = o->errors[i];
            return -1;
        }
        if (sink && sink(o->arg, i, e) < 0)
            return -1;
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
    ordered_run o = { .work = work, .arg = arg };
    o.state = calloc(n, 1);
    o.errors = calloc(n, sizeof *o.errors);
    if (!o.state || !o.errors) {
        free(o.state);
        free(o.errors);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    pthread_mutex_init(&o.lock, NULL);
    pthread_cond_init(&o.changed, NULL);
    size_t queued = 0;
    int rc = sink_in_order(p, &o, n, window ? window : 1, sink, &queued, e);
    pthread_mutex_lock(&o.lock);
    o.stop = true;
    while (o.returned < queued)
        pthread_cond_wait(&o.changed, &o.lock);
    pthread_mutex_unlock(&o.lock);
    pthread_cond_destroy(&o.changed);
    pthread_mutex_destroy(&o.lock);
    free(o.state);
    free(o.errors);
    return rc;
}
