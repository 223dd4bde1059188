/* The thread pool: a fixed set of threads that run the tasks queued to
 * them, first queued first run. Every thread of the library that works
 * for a caller belongs to one:
 *   - short tasks, such as encoding chunks, whose results a caller takes
 *     in order (tf_pool_run_ordered);
 *   - long-lived workers, such as the prefetcher's and a remote
 *     archive's fetchers: a worker is a task that loops on its owner's
 *     own queue until the owner tells it to stop; a pool of n threads
 *     given n such tasks is a set of n workers, stopped by telling them
 *     to, then freeing the pool.
 * A pool given long-lived workers runs nothing else: a task queued
 * behind a worker that never returns would never run. */
#ifndef TRAJFS_COMMON_POOL_H
#define TRAJFS_COMMON_POOL_H

#include <stddef.h>

#include "common/error.h"

typedef struct tf_pool tf_pool;

/* A pool of `threads` threads (at least one); NULL when out of memory or
 * when the threads cannot all start. */
tf_pool *tf_pool_new(unsigned threads);

/* Runs the tasks still queued, waits for every one to return, and stops
 * the threads. NULL: nothing. */
void tf_pool_free(tf_pool *p);

/* The number of its threads. */
unsigned tf_pool_threads(const tf_pool *p);

/* Queues fn(arg) and returns at once. -1 when out of memory. */
int tf_pool_add(tf_pool *p, void (*fn)(void *arg), void *arg, tf_error *e);

/* Runs work(arg, i) for i in [0, n) on the pool's threads, and on the
 * calling thread when the job it waits for has not started; then, in
 * index order, sink(arg, i) (when not NULL) on the calling thread as
 * soon as job i is done, so that what the sink makes of the results
 * does not depend on the number of threads. Jobs start at most `window`
 * ahead of the sink, which bounds the memory held by finished jobs.
 * Without a pool (p NULL), the calling thread does each job, then its
 * sink, while its data is hot. Stops at the first failure (work or
 * sink) and returns -1 with its error; the jobs under way are finished
 * first, those not started are not. */
int tf_pool_run_ordered(tf_pool *p, size_t n, size_t window,
                        int (*work)(void *arg, size_t i, tf_error *e),
                        int (*sink)(void *arg, size_t i, tf_error *e), void *arg, tf_error *e);

#endif
