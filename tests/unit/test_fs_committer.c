/* The committer thread (fs/committer.h): jobs run one at a time in the
 * order they were queued, with the context given; stopping runs those
 * still queued; a job that waits for something else is told to give way
 * when another job is queued behind it (at once when one is already),
 * and when the committer stops. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "testlib.h"

#include "fs/committer.h"

#define NJOBS 50

typedef struct {
    fs_job job; /* first */
    int n;
} numbered_job;

typedef struct {
    pthread_mutex_t lock;
    int ran[NJOBS];
    int nran;
} record;

static void run_numbered(fs_job *job, void *ctx)
{
    record *r = ctx;
    numbered_job *j = (numbered_job *)job;
    pthread_mutex_lock(&r->lock);
    r->ran[r->nran++] = j->n;
    pthread_mutex_unlock(&r->lock);
    free(j);
}

static void push_numbered(fs_committer *c, int n)
{
    numbered_job *j = malloc(sizeof *j);
    ck_assert_ptr_nonnull(j);
    *j = (numbered_job){ .job = { .run = run_numbered }, .n = n };
    fs_committer_push(c, &j->job);
}

START_TEST(jobs_run_in_order_and_stop_runs_the_rest)
{
    record r = { .lock = PTHREAD_MUTEX_INITIALIZER };
    fs_committer c;
    ck_assert_int_eq(fs_committer_start(&c, &r), 0);
    for (int i = 0; i < NJOBS; i++)
        push_numbered(&c, i);
    fs_committer_stop(&c);
    ck_assert_int_eq(r.nran, NJOBS);
    for (int i = 0; i < NJOBS; i++)
        ck_assert_int_eq(r.ran[i], i);
}
END_TEST

/* A job that waits until it is told to give way. */
typedef struct {
    fs_job job; /* first */
    fs_committer *c;
    pthread_mutex_t lock;
    pthread_cond_t told;
    bool gave_way, waiting;
} waiting_job;

static void give_way(void *arg)
{
    waiting_job *w = arg;
    pthread_mutex_lock(&w->lock);
    w->gave_way = true;
    pthread_cond_broadcast(&w->told);
    pthread_mutex_unlock(&w->lock);
}

static void run_waiting(fs_job *job, void *ctx)
{
    (void)ctx;
    waiting_job *w = (waiting_job *)job;
    fs_committer_on_waiting(w->c, give_way, w);
    pthread_mutex_lock(&w->lock);
    w->waiting = true;
    pthread_cond_broadcast(&w->told);
    while (!w->gave_way)
        pthread_cond_wait(&w->told, &w->lock);
    pthread_mutex_unlock(&w->lock);
    fs_committer_on_waiting(w->c, NULL, NULL);
}

static void init_waiting(waiting_job *w, fs_committer *c)
{
    *w = (waiting_job){ .job = { .run = run_waiting }, .c = c };
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->told, NULL);
}

static void await_waiting(waiting_job *w)
{
    pthread_mutex_lock(&w->lock);
    while (!w->waiting)
        pthread_cond_wait(&w->told, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

START_TEST(a_waiting_job_gives_way_to_the_next)
{
    record r = { .lock = PTHREAD_MUTEX_INITIALIZER };
    fs_committer c;
    waiting_job w;
    init_waiting(&w, &c);
    ck_assert_int_eq(fs_committer_start(&c, &r), 0);
    fs_committer_push(&c, &w.job);
    await_waiting(&w);
    push_numbered(&c, 7); /* wakes w, then runs */
    fs_committer_stop(&c);
    ck_assert(w.gave_way);
    ck_assert_int_eq(r.nran, 1);
}
END_TEST

/* A job that holds the committer until a byte comes down a pipe. */
typedef struct {
    fs_job job; /* first */
    int fd;
} gate_job;

static void run_gate(fs_job *job, void *ctx)
{
    (void)ctx;
    char b;
    ck_assert_int_eq(read(((gate_job *)job)->fd, &b, 1), 1);
}

START_TEST(a_job_queued_already_makes_it_give_way_at_once)
{
    record r = { .lock = PTHREAD_MUTEX_INITIALIZER };
    fs_committer c;
    waiting_job w;
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    gate_job gate = { .job = { .run = run_gate }, .fd = pipefd[0] };
    init_waiting(&w, &c);
    ck_assert_int_eq(fs_committer_start(&c, &r), 0);
    fs_committer_push(&c, &gate.job);
    fs_committer_push(&c, &w.job);
    push_numbered(&c, 1); /* queued before w runs */
    ck_assert_int_eq(write(pipefd[1], "x", 1), 1);
    fs_committer_stop(&c);
    ck_assert(w.gave_way);
    ck_assert_int_eq(r.nran, 1);
    close(pipefd[0]);
    close(pipefd[1]);
}
END_TEST

START_TEST(stopping_makes_a_waiting_job_give_way)
{
    fs_committer c;
    waiting_job w;
    init_waiting(&w, &c);
    ck_assert_int_eq(fs_committer_start(&c, NULL), 0);
    fs_committer_push(&c, &w.job);
    await_waiting(&w);
    fs_committer_stop(&c);
    ck_assert(w.gave_way);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fs_committer");
    TCase *tc = tcase_create("committer");
    tcase_add_test(tc, jobs_run_in_order_and_stop_runs_the_rest);
    tcase_add_test(tc, a_waiting_job_gives_way_to_the_next);
    tcase_add_test(tc, a_job_queued_already_makes_it_give_way_at_once);
    tcase_add_test(tc, stopping_makes_a_waiting_job_give_way);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
