/* A remote archive, read-only: an http://, https:// or s3:// object read
 * by byte range. Reads are served from what was fetched and not read
 * yet, then from the disk cache (cache_dir), then fetched. The ranges
 * hinted with tf_remote_will_need (a reference chain's blobs, the
 * prefetcher's chunks) are fetched in the background as they come, by
 * as many fetchers as transfers may run at once (parallel=N), those
 * that touch merged into requests of up to a MiB: a read waits only for
 * the request that holds its bytes. Thread-safe. */
#ifndef TRAJFS_IO_REMOTE_H
#define TRAJFS_IO_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "io/remote_opts.h"

typedef struct tf_remote tf_remote;

/* Whether path names a remote object: its URL (http://, https://,
 * s3://), or where its URL is kept, out of sight of other users (a
 * command line is not: ps shows it): url-env:NAME, the environment
 * variable NAME; url-file:PATH, the first line of the file PATH. */
bool tf_remote_is_url(const char *path);
/* The URL that a name tf_remote_is_url accepts stands for, in *url
 * (malloc'd); EINVAL when there is none (the message never shows a
 * URL read from the environment or a file). */
int tf_remote_resolve_url(const char *name, char **url, tf_error *e);
/* url as messages and logs may show it (malloc'd, NULL when out of
 * memory): without user and password, query (a presigned URL's
 * signature) and fragment; anything but an http://, https:// or s3://
 * URL (a local path, url-env:NAME) as it is. */
char *tf_remote_shown_url(const char *url);

/* The settings of the objects opened from now on (copied). Until it is
 * called, those of TRAJFS_REMOTE_OPTIONS over the defaults. */
int tf_remote_configure(const tf_remote_opts *o, tf_error *e);

/* Opens url with one request, for its last bytes, which also tells its
 * size and identity. */
int tf_remote_open(const char *url, tf_remote **out, tf_error *e);
void tf_remote_close(tf_remote *r);
/* Ends the transfers under way at once, and fails every later read
 * that must fetch (ECANCELED): the object is about to be closed, and no
 * one waits for a slow server's timeouts (tf_remote_close does it too). */
void tf_remote_cancel(tf_remote *r);
uint64_t tf_remote_size(tf_remote *r);

/* An object followed as it grows (a mount with -o follow): appends
 * change its size and ETag. A read whose response says so, and each
 * refresh, ask the server (one request for the first byte) what the
 * object is now, and adopt it only when it still holds, where it was,
 * the trailer of the newest commit known (the anchor: what the object
 * ended with when opened, then what tf_remote_anchor says): then the
 * bytes kept (staged, and in the disk cache, which holds only bytes
 * below the anchor) stay right, and reads may reach the new size. An
 * object cut shorter or rewritten is not adopted: the refresh, and reads
 * of it, fail (EIO).
 * tf_remote_refresh: *size is the size now, *changed whether another
 * size or ETag was adopted since the last refresh. */
int tf_remote_refresh(tf_remote *r, uint64_t *size, bool *changed, tf_error *e);
/* A valid commit's trailer, its n (<= 64) bytes ending at end, is the
 * newest: the anchor from now on (also of the disk cache). */
void tf_remote_anchor(tf_remote *r, uint64_t end, const uint8_t *bytes, size_t n);

/* Reads exactly [off, off + len); EIO when it cannot be had. */
int tf_remote_pread(tf_remote *r, uint64_t off, void *buf, size_t len, tf_error *e);
/* [off, off + len) will be read soon: a fetcher fetches it (a read of
 * it before then fetches it itself). A hint: changes nothing visible. */
void tf_remote_will_need(tf_remote *r, uint64_t off, uint64_t len);
/* Forgets every kept copy of bytes in [off, off + len) (in memory and
 * in the disk cache), after they failed a checksum: the next read
 * fetches them again. */
void tf_remote_forget(tf_remote *r, uint64_t off, uint64_t len);

#endif
