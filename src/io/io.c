#include "io/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "io/remote.h"
#include "io/s3_writer.h"
#include "io/url.h"

char *tf_io_display_name(const char *path)
{
    return tf_io_is_url(path) ? tf_io_shown_name(path) : realpath(path, NULL);
}

int tf_io_open(const char *path, const tf_open_opts *o, tf_io **out, tf_error *e)
{
    bool writable = o && o->writable;
    if (!tf_io_is_url(path))
        return tf_file_open(path, writable, out, e);
    tf_remote_opts defaults;
    tf_remote_opts_default(&defaults);
    const tf_remote_opts *ro = o && o->remote ? o->remote : &defaults;
    return writable ? tf_s3_writer_open(path, ro, out, e) : tf_remote_open(path, ro, out, e);
}

int tf_io_create(const char *path, const tf_remote_opts *remote, const void *bytes, size_t len,
                 tf_error *e)
{
    return tf_io_is_url(path) ? tf_s3_writer_create(path, remote, bytes, len, e)
                              : tf_file_create(path, bytes, len, e);
}

void tf_io_close(tf_io *io)
{
    if (io)
        io->ops->close(io);
}

bool tf_io_tears(const tf_io *io) { return io->ops->tears; }
bool tf_io_is_remote(const tf_io *io) { return io->ops->remote; }
bool tf_io_ordered(const tf_io *io) { return io->ops->ordered; }

int tf_io_pread(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e)
{
    return io->ops->pread(io, off, buf, len, e);
}

void tf_io_will_need(tf_io *io, uint64_t off, uint64_t len)
{
    if (io->ops->will_need)
        io->ops->will_need(io, off, len);
}

bool tf_io_forget(tf_io *io, uint64_t off, uint64_t len)
{
    return io->ops->forget && io->ops->forget(io, off, len);
}

int tf_io_poll(tf_io *io, uint64_t *size, bool *changed, tf_error *e)
{
    return io->ops->poll(io, size, changed, e);
}

void tf_io_anchor(tf_io *io, uint64_t end, const uint8_t *bytes, size_t n)
{
    if (io->ops->anchor)
        io->ops->anchor(io, end, bytes, n);
}

int tf_io_stat(tf_io *io, struct stat *st, tf_error *e)
{
    return io->ops->stat(io, st, e);
}

/* What a storage without the operation answers. */
static int not_supported(tf_error *e, const char *what)
{
    return tf_fail(e, ENOTSUP, "%s: not supported by this storage", what);
}

int tf_io_free_space(tf_io *io, uint64_t *bytes, tf_error *e)
{
    return io->ops->free_space ? io->ops->free_space(io, bytes, e) : not_supported(e, "free space");
}

int tf_io_lock(tf_io *io, tf_error *e)
{
    return io->ops->lock ? io->ops->lock(io, e) : not_supported(e, "lock");
}

int tf_io_append(tf_io *io, const void *p, size_t len, uint64_t off, tf_error *e)
{
    return io->ops->append ? io->ops->append(io, p, len, off, e) : not_supported(e, "append");
}

int tf_io_sync(tf_io *io, tf_error *e)
{
    return io->ops->sync ? io->ops->sync(io, e) : not_supported(e, "sync");
}

int tf_io_publish(tf_io *io, tf_error *e)
{
    return io->ops->publish ? io->ops->publish(io, e) : tf_io_sync(io, e);
}

int tf_io_truncate(tf_io *io, uint64_t size, tf_error *e)
{
    return io->ops->truncate ? io->ops->truncate(io, size, e) : not_supported(e, "truncate");
}

int tf_io_punch(tf_io *io, uint64_t off, uint64_t len, tf_error *e)
{
    return io->ops->punch ? io->ops->punch(io, off, len, e) : not_supported(e, "punching holes");
}

int tf_io_seal(tf_io *io, tf_error *e)
{
    return io->ops->seal ? io->ops->seal(io, e) : not_supported(e, "sealing");
}

int tf_io_replace(tf_io *io, int fd, uint64_t size, tf_error *e)
{
    return io->ops->replace ? io->ops->replace(io, fd, size, e) : not_supported(e, "replacing whole");
}

void tf_io_cancel(tf_io *io)
{
    if (io->ops->cancel)
        io->ops->cancel(io);
}
