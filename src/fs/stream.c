#include "fs/stream.h"

#include <errno.h>

#include "fs/fs.h"
#include "fs/mutate.h"

void fs_stream_start(fs_state *fs, uint64_t fh, uint64_t ino, uint64_t serial)
{
    struct fs_job *job = fs_job_new(FS_JOB_STREAM, NULL, NULL, NULL, NULL);
    if (!job)
        return; /* the file is encoded at its close */
    job->fh = fh;
    job->ino = ino;
    job->serial = serial;
    fs_committer_push(&fs->committer, job);
}

void fs_stream_note_write(fs_state *fs, fs_handle *h, uint64_t off, size_t len)
{
    fs_committer *c = &fs->committer;
    pthread_mutex_lock(&c->lock);
    if (h->streaming) {
        /* A write past the bytes in order leaves them as they are (the
         * stream then waits for its close, and gives up). */
        if (off < h->streamed)
            h->stream_broken = true;
        else if (off == h->streamed)
            h->streamed += len;
        fs_committer_progress(c);
    }
    pthread_mutex_unlock(&c->lock);
}

void fs_stream_note_truncate(fs_state *fs, fs_handle *h, uint64_t size)
{
    fs_committer *c = &fs->committer;
    pthread_mutex_lock(&c->lock);
    if (h->streaming && size < h->streamed) {
        h->stream_broken = true;
        fs_committer_progress(c);
    }
    pthread_mutex_unlock(&c->lock);
}

void fs_stream_end(fs_state *fs, fs_handle *h)
{
    pthread_mutex_lock(&fs->committer.lock);
    h->streaming = false;
    pthread_mutex_unlock(&fs->committer.lock);
}

typedef struct {
    fs_state *fs;
    fs_handle *h;
    uint64_t fh;
    bool holds_io; /* settled: h->io is held until the commit is done */
} stream;

static int give_up(tf_error *e)
{
    return tf_fail(e, ECANCELED, "the file is not written in order, as its start said");
}

static int await_bytes(void *arg, uint64_t end, tf_error *e)
{
    stream *s = arg;
    fs_committer *c = &s->fs->committer;
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    while (!s->h->stream_broken && !c->stopping && s->h->streamed < end) {
        /* Complete and short of end, or others wait for the committer. */
        if (fs_committer_queued(c, s->fh) != FS_QUEUED_NOTHING)
            break;
        fs_committer_wait(c);
    }
    if (s->h->stream_broken || s->h->streamed < end)
        rc = give_up(e);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Waits for the file's close; false when the stream must give up. */
static bool await_close(stream *s, uint64_t size)
{
    fs_committer *c = &s->fs->committer;
    bool closed = false;
    pthread_mutex_lock(&c->lock);
    while (!s->h->stream_broken && !c->stopping && s->h->streamed <= size) {
        fs_queued q = fs_committer_queued(c, s->fh);
        if (q != FS_QUEUED_NOTHING) {
            closed = q == FS_QUEUED_CLOSE;
            break;
        }
        fs_committer_wait(c);
    }
    pthread_mutex_unlock(&c->lock);
    return closed;
}

static int settle(void *arg, uint64_t size, uint32_t *mode, struct timespec *mtime, tf_error *e)
{
    stream *s = arg;
    if (!await_close(s, size))
        return give_up(e);
    /* From here on writes wait for the commit, as for one at close; those
     * before were all noted. */
    pthread_mutex_lock(&s->h->io);
    pthread_mutex_lock(&s->fs->committer.lock);
    bool whole = !s->h->stream_broken && s->h->streamed == size;
    pthread_mutex_unlock(&s->fs->committer.lock);
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    if (!whole || !fs_handles_pending_commit(&s->fs->handles, s->h, false, &a, name) ||
        a.size != size) {
        pthread_mutex_unlock(&s->h->io);
        return give_up(e);
    }
    s->holds_io = true;
    *mode = a.mode;
    *mtime = a.mtime;
    return 0;
}

int fs_stream_commit(fs_state *fs, fs_handle *h, uint64_t fh, const char *path,
                     const tf_entry_attrs *attrs, tf_error *e)
{
    stream s = { .fs = fs, .h = h, .fh = fh };
    tf_growing_file g = { .fd = h->spool, .await = await_bytes, .settle = settle, .arg = &s };
    int rc = tf_writer_add_growing(fs->writer, &g, path, attrs, e);
    if (!s.holds_io)
        return rc;
    if (rc == 0)
        fs_handles_committed(&fs->handles, h, true);
    pthread_mutex_unlock(&h->io);
    return rc;
}
