/* The thread pool (common/pool.h): tasks, ordered runs, long-lived
 * workers. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "testlib.h"

#include "common/pool.h"

#define JOBS 200

typedef struct {
    pthread_mutex_t lock;
    size_t done[JOBS];      /* jobs finished when job i started */
    size_t finished, sunk;
    size_t sunk_order[JOBS];
    size_t most_ahead;      /* jobs started past the sink, at most */
    size_t started;
    size_t fail_at;         /* work of this job fails (JOBS: none) */
    size_t sink_fail_at;    /* sink of this job fails (JOBS: none) */
} jobs;

static int job_work(void *arg, size_t i, tf_error *e)
{
    jobs *j = arg;
    pthread_mutex_lock(&j->lock);
    j->started++;
    size_t ahead = i - j->sunk;
    if (ahead > j->most_ahead)
        j->most_ahead = ahead;
    pthread_mutex_unlock(&j->lock);
    if (i == j->fail_at)
        return tf_fail(e, EIO, "job %zu failed", i);
    pthread_mutex_lock(&j->lock);
    j->finished++;
    pthread_mutex_unlock(&j->lock);
    return 0;
}

static int job_sink(void *arg, size_t i, tf_error *e)
{
    jobs *j = arg;
    if (i == j->sink_fail_at)
        return tf_fail(e, ENOSPC, "sink %zu failed", i);
    pthread_mutex_lock(&j->lock);
    j->sunk_order[j->sunk++] = i;
    pthread_mutex_unlock(&j->lock);
    return 0;
}

static void jobs_init(jobs *j)
{
    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->lock, NULL);
    j->fail_at = j->sink_fail_at = JOBS;
}

/* An ordered run of JOBS jobs on p, in a window of 8: every job done,
 * sunk in order, none started 8 or more ahead of the sink. */
static void expect_run_in_order(tf_pool *p)
{
    jobs j;
    jobs_init(&j);
    tf_error e;
    ck_assert_int_eq(tf_pool_run_ordered(p, JOBS, 8, job_work, job_sink, &j, &e), 0);
    ck_assert_uint_eq(j.finished, JOBS);
    ck_assert_uint_eq(j.sunk, JOBS);
    for (size_t i = 0; i < JOBS; i++)
        ck_assert_uint_eq(j.sunk_order[i], i);
    ck_assert_uint_lt(j.most_ahead, 8);
}

START_TEST(ordered_run_sinks_in_order_within_the_window)
{
    unsigned threads = (unsigned)_i; /* 0: no pool */
    tf_pool *p = threads ? tf_pool_new(threads) : NULL;
    ck_assert(!threads || p);
    expect_run_in_order(p);
    tf_pool_free(p);
}
END_TEST

START_TEST(ordered_run_stops_at_the_first_failure)
{
    tf_pool *p = tf_pool_new(3);
    ck_assert_ptr_nonnull(p);
    jobs j;
    jobs_init(&j);
    j.fail_at = 50;
    tf_error e;
    ck_assert_int_eq(tf_pool_run_ordered(p, JOBS, 4, job_work, job_sink, &j, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_str_eq(e.msg, "job 50 failed");
    ck_assert_uint_eq(j.sunk, 50);
    ck_assert_uint_le(j.started, 50 + 4);

    jobs_init(&j);
    j.sink_fail_at = 10;
    ck_assert_int_eq(tf_pool_run_ordered(p, JOBS, 4, job_work, job_sink, &j, &e), -1);
    ck_assert_int_eq(e.errnum, ENOSPC);
    ck_assert_uint_eq(j.sunk, 10);
    /* The pool runs the next run after a failed one. */
    jobs_init(&j);
    ck_assert_int_eq(tf_pool_run_ordered(p, JOBS, 4, job_work, NULL, &j, &e), 0);
    ck_assert_uint_eq(j.finished, JOBS);
    tf_pool_free(p);
}
END_TEST

/* Long-lived workers: tasks that wait on their owner's queue until told
 * to stop. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned running, items;
    bool stop;
} owner;

static void worker_loop(void *arg)
{
    owner *o = arg;
    pthread_mutex_lock(&o->lock);
    o->running++;
    pthread_cond_broadcast(&o->changed);
    while (!o->stop)
        pthread_cond_wait(&o->changed, &o->lock);
    o->running--;
    pthread_mutex_unlock(&o->lock);
}

/* A pool of `threads` threads given n tasks fn(o). */
static tf_pool *pool_running(unsigned threads, int n, void (*fn)(void *), owner *o)
{
    tf_pool *p = tf_pool_new(threads);
    ck_assert_ptr_nonnull(p);
    tf_error e;
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tf_pool_add(p, fn, o, &e), 0);
    return p;
}

START_TEST(workers_run_side_by_side_until_stopped)
{
    owner o = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };
    tf_pool *p = pool_running(4, 4, worker_loop, &o);
    pthread_mutex_lock(&o.lock);
    while (o.running < 4) /* all four at once: one thread each */
        pthread_cond_wait(&o.changed, &o.lock);
    o.stop = true;
    pthread_cond_broadcast(&o.changed);
    pthread_mutex_unlock(&o.lock);
    tf_pool_free(p);
    ck_assert_uint_eq(o.running, 0);
}
END_TEST

/* The calling thread runs the jobs that no pool thread is free for: a
 * run finishes while every thread of its pool is kept by a worker. */
START_TEST(ordered_run_moves_on_without_a_free_thread)
{
    owner o = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };
    tf_pool *p = pool_running(2, 2, worker_loop, &o);
    pthread_mutex_lock(&o.lock);
    while (o.running < 2)
        pthread_cond_wait(&o.changed, &o.lock);
    pthread_mutex_unlock(&o.lock);
    expect_run_in_order(p);
    pthread_mutex_lock(&o.lock);
    o.stop = true;
    pthread_cond_broadcast(&o.changed);
    pthread_mutex_unlock(&o.lock);
    tf_pool_free(p);
}
END_TEST

static void count_item(void *arg)
{
    owner *o = arg;
    pthread_mutex_lock(&o->lock);
    o->items++;
    pthread_mutex_unlock(&o->lock);
}

START_TEST(free_runs_the_tasks_queued)
{
    owner o = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };
    tf_pool *p = pool_running(2, 1000, count_item, &o);
    tf_pool_free(p);
    ck_assert_uint_eq(o.items, 1000);
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *t = tcase_create("pool");
    tcase_add_loop_test(t, ordered_run_sinks_in_order_within_the_window, 0, 5);
    tcase_add_test(t, ordered_run_stops_at_the_first_failure);
    tcase_add_test(t, workers_run_side_by_side_until_stopped);
    tcase_add_test(t, ordered_run_moves_on_without_a_free_thread);
    tcase_add_test(t, free_runs_the_tasks_queued);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return run_suite(pool_suite());
}
