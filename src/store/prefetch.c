#include "store/prefetch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/pool.h"
#include "store/file_map.h"

/* Blobs waiting: far more than a window of chunks. */
#define QUEUE_MAX 4096
/* A read continues the reads of a file when it starts at most this far
 * past what they had queued: the kernel's read-ahead sends the next
 * pieces of a file read in order side by side, not one after the other
 * (and trajfs's default window is 4 MiB). */
#define CONTINUES_BYTES ((uint64_t)8 << 20)
/* Queued blobs whose stored bytes a thread asks the kernel for before
 * each reconstruction, at most: enough to stay ahead of the decoding
 * (a reconstruction takes longer than asking for a few chains), few
 * enough that the first one starts at once. */
#define HINTS_MAX 16

struct tf_prefetch {
    tf_reader_ctx *r;
    unsigned chunk_shift;
    uint64_t window;
    tf_prefetch_guard guard;
    pthread_mutex_t lock;
    pthread_cond_t work; /* queued, or stopping */
    pthread_cond_t idle; /* nothing queued, nothing under way */
    uint64_t queue[QUEUE_MAX]; /* a ring of blob indices */
    size_t head, len;
    size_t hinted; /* the first `hinted` queued had their bytes asked for */
    unsigned busy; /* threads reconstructing */
    bool stop;
    tf_pool *workers; /* one worker() per thread */
};

/* Takes the oldest queued blob; the caller holds the lock. */
static uint64_t pop(tf_prefetch *p)
{
    uint64_t blob = p->queue[p->head];
    p->head = (p->head + 1) % QUEUE_MAX;
    p->len--;
    if (p->hinted)
        p->hinted--;
    return blob;
}

/* Copies the queued blobs not yet hinted into hints (HINTS_MAX at most)
 * and counts them hinted; the caller holds the lock. */
static size_t take_hints(tf_prefetch *p, uint64_t *hints)
{
    size_t n = 0;
    for (; p->hinted < p->len && n < HINTS_MAX; p->hinted++)
        hints[n++] = p->queue[(p->head + p->hinted) % QUEUE_MAX];
    return n;
}

/* Before each reconstruction, a thread asks the kernel for the stored
 * bytes of the next chunks queued and not asked for yet, chains
 * included: the reads run ahead of the decoding, many at once, in
 * requests the kernel merges, instead of one chain step at a time. */
static void worker(void *arg)
{
    tf_prefetch *p = arg;
    uint64_t hints[HINTS_MAX];
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->len && !p->stop)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        size_t nhints = take_hints(p, hints);
        uint64_t blob = pop(p);
        p->busy++;
        pthread_mutex_unlock(&p->lock);
        if (p->guard.hold)
            p->guard.hold(p->guard.arg);
        tf_reader_will_need(p->r, hints, nhints);
        tf_reader_warm(p->r, blob);
        if (p->guard.release)
            p->guard.release(p->guard.arg);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0 && !p->len)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
}

tf_prefetch *tf_prefetch_new(const tf_archive *ar, tf_reader_ctx *r, unsigned threads,
                             uint64_t window, const tf_prefetch_guard *guard)
{
    tf_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    *p = (tf_prefetch){ .r = r, .chunk_shift = tf_archive_chunk_shift(ar), .window = window };
    if (guard)
        p->guard = *guard;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    unsigned started = 0;
    if ((p->workers = tf_pool_new(threads)))
        while (started < threads && tf_pool_add(p->workers, worker, p, NULL) == 0)
            started++;
    if (started < threads) {
        tf_prefetch_free(p);
        return NULL;
    }
    return p;
}

void tf_prefetch_free(tf_prefetch *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    tf_pool_free(p->workers);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Queues a blob; the caller holds the lock. */
static void push(tf_prefetch *p, uint64_t blob)
{
    if (p->len == QUEUE_MAX) /* drop the oldest */
        (void)pop(p);
    p->queue[(p->head + p->len++) % QUEUE_MAX] = blob;
}

/* Queues the chunks holding bytes [from, to) of a chunk run (from < to);
 * the caller holds the lock. */
static void queue_chunks(tf_prefetch *p, const tf_chunk_run *run, uint64_t from, uint64_t to)
{
    uint64_t last = (run->start + to - 1) / run->chunk_bytes;
    for (uint64_t c = (run->start + from) / run->chunk_bytes; c <= last; c++)
        push(p, run->chunks[c]);
}

/* Queues the chunks holding bytes [off, end) of ent (off < end); the
 * caller holds the lock. */
static void queue_range(tf_prefetch *p, const tf_entry *ent, uint64_t off, uint64_t end)
{
    tf_chunk_run run;
    if (ent->kind == TF_ENTRY_FILE) {
        tf_piece_chunks(ent, 0, p->chunk_shift, &run);
        queue_chunks(p, &run, off, end);
        return;
    }
    for (uint64_t i = tf_piece_at(ent, off); i < ent->npieces && ent->pieces[i].file_off < end; i++) {
        const tf_piece *pc = &ent->pieces[i];
        uint64_t from = off > pc->file_off ? off - pc->file_off : 0;
        uint64_t to = (end < pc->file_off + pc->len ? end : pc->file_off + pc->len) - pc->file_off;
        if (from < to && tf_piece_chunks(ent, i, p->chunk_shift, &run))
            queue_chunks(p, &run, from, to);
    }
}

/* Where the rest of what a read starting at off begins to read ends: the
 * end of the tensor holding off, or 0 when off is in a header (whatever
 * the read covers after it: the kernel reads ahead of a header into the
 * tensors that follow, which a loader picking one tensor never reads).
 * An opaque file is one run of bytes: the read's end. */
static uint64_t rest_of_tensor(const tf_entry *ent, uint64_t off, uint64_t end)
{
    if (ent->kind != TF_ENTRY_TENSORS)
        return end;
    const tf_piece *p = &ent->pieces[tf_piece_at(ent, off)];
    return p->tensor == TF_PIECE_VERBATIM ? 0 : p->file_off + p->len;
}

void tf_prefetch_read(tf_prefetch *p, const tf_entry *ent, tf_prefetch_cursor *cur, uint64_t off,
                      uint64_t len)
{
    /* A body not read yet: the read reads it, and the next call queues. */
    if (!p || !tf_entry_is_regular(ent) || off >= ent->size ||
        atomic_load_explicit(&ent->body_pending, memory_order_acquire))
        return;
    uint64_t end = len < ent->size - off ? off + len : ent->size;
    uint64_t want = rest_of_tensor(ent, off, end);
    if (!want)
        return;
    pthread_mutex_lock(&p->lock);
    /* The first read of a file does not show an order (a read of the
     * header, then of the tensor wanted, is the first read of a tensor):
     * decoding all of a checkpoint ahead of such a read made picking its
     * last tensor 8 times as slow. */
    bool in_order = cur->hi && off >= cur->lo && off <= cur->hi + CONTINUES_BYTES;
    if (!in_order)
        cur->lo = cur->hi = off;
    uint64_t ahead = p->window < ent->size - end ? end + p->window : ent->size;
    if (in_order && ahead > want)
        want = ahead;
    if (want > cur->hi) {
        queue_range(p, ent, cur->hi > off ? cur->hi : off, want);
        cur->hi = want;
        pthread_cond_broadcast(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
}

void tf_prefetch_wait(tf_prefetch *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->len || p->busy)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
