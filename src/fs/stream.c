#include "fs/stream.h"

#include <errno.h>

/* The growing file the writer encodes (store/source.h): h's spool. */
typedef struct {
    fs_state *fs;
    fs_handle *h;
} stream;

static int give_up(tf_error *e)
{
    return tf_fail(e, ECANCELED, "the file is not written in order, as its start said");
}

static int await_bytes(void *arg, uint64_t end, tf_error *e)
{
    stream *s = arg;
    return fs_stream_state_await_bytes(&s->h->stream, end) ? 0 : give_up(e);
}

/* Once the file is closed, as its start said, holds its spool: writes
 * that come now wait for the commit (release), as for one at close;
 * those before were all noted. */
static int settle(void *arg, uint64_t size, uint32_t *mode, struct timespec *mtime, tf_error *e)
{
    stream *s = arg;
    if (!fs_stream_state_await_close(&s->h->stream, size))
        return give_up(e);
    fs_handle_hold(s->h);
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    if (!fs_stream_state_whole(&s->h->stream, size) ||
        !fs_handles_pending_commit(&s->fs->handles, s->h, false, &a, name) || a.size != size) {
        fs_handle_unhold(s->h);
        return give_up(e);
    }
    *mode = a.mode;
    *mtime = a.mtime;
    return 0;
}

static void release(void *arg, bool added)
{
    stream *s = arg;
    if (added)
        fs_handles_committed(&s->fs->handles, s->h, true);
    fs_handle_unhold(s->h);
}

int fs_stream_commit(fs_state *fs, fs_handle *h, const char *path, const tf_entry_attrs *attrs,
                     tf_error *e)
{
    stream s = { .fs = fs, .h = h };
    tf_growing_file g = { .fd = h->spool, .await = await_bytes, .settle = settle,
                          .release = release, .arg = &s };
    fs_committer_on_waiting(&fs->committer, fs_stream_state_give_way, &h->stream);
    int rc = tf_writer_add_growing(fs->writer, &g, path, attrs, e);
    fs_committer_on_waiting(&fs->committer, NULL, NULL);
    return rc;
}
