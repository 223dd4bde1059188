/* A remote archive, read-only: an http://, https:// or s3:// object read
 * by byte range, as the bytes of an archive (io/io.h). Reads are served
 * from what was fetched and not read yet, then from the disk cache
 * (cache_dir), then fetched. The ranges hinted with will_need (a
 * reference chain's blobs, the prefetcher's chunks) are fetched in the
 * background as they come, by as many fetchers as transfers may run at
 * once (parallel=N), those that touch merged into requests of up to a
 * MiB: a read waits only for the request that holds its bytes. forget
 * drops the bytes kept in memory and in the disk cache. Thread-safe.
 *
 * Followed as it grows (a mount with -o follow), appends change the
 * object's size and ETag. A read whose response says so, and each poll,
 * ask the server (one request for the first byte) what the object is
 * now, and adopt it only when it still holds, where it was, the trailer
 * of the newest commit known (the anchor: what the object ended with
 * when opened, then what the anchor operation says): then the bytes kept
 * (staged, and in the disk cache, which holds only bytes below the
 * anchor) stay right, and reads may reach the new size. An object cut
 * shorter or rewritten is not adopted: the poll, and reads of it, fail
 * (EIO). A poll tells a change when another size or ETag was adopted
 * since the last poll. */
#ifndef TRAJFS_IO_REMOTE_H
#define TRAJFS_IO_REMOTE_H

#include "common/error.h"
#include "io/io.h"
#include "io/remote_opts.h"

/* Opens url with one request, for its last bytes, which also tells its
 * size and identity. The settings are read, not kept. */
int tf_remote_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e);
/* The segments of io (of tf_remote_open): an archive written in
 * segments (io/segments.h), which a writer can grow; NULL: one object. */
struct tf_segments *tf_remote_segments(tf_io *io);
/* The HTTP handle of io (of tf_remote_open), borrowed until io closes:
 * a writer of the archive sends its requests through it (one pool of
 * connections, one bound of transfers at once). */
struct tf_http *tf_remote_http(tf_io *io);
/* The len bytes at off, which the file fd holds from its start, are the
 * segment that this process's writer just published (io has polled
 * since): with a disk cache, they go there whole, its anchor moved to
 * their end, their last commit's; later writers and mounts on this
 * machine read them from there. */
void tf_remote_keep(tf_io *io, uint64_t off, uint64_t len, int fd);

#endif
