/* The archive file: a superblock, then commits. A commit is blobs, a
 * zstd-compressed catalog segment and a fixed-size checksummed trailer that
 * points to the segment and to the previous trailer. Nothing a committed
 * trailer points to is ever rewritten; opening takes the last valid
 * trailer, so a torn tail (crash, full disk) is ignored. See trajfs(5). */
#ifndef TRAJFS_FORMAT_CONTAINER_H
#define TRAJFS_FORMAT_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "format/behind.h"
#include "io/io.h"

/* Format versions: 1, a catalog segment a commit (every open applies
 * them all); 2, a catalog in pages (format/page.h), a root a commit. */
#define TF_FORMAT_SEGMENTS 1
#define TF_FORMAT_PAGES 2
#define TF_FORMAT_DEFAULT TF_FORMAT_PAGES
#define TF_SUPERBLOCK_SIZE 32
#define TF_TRAILER_SIZE 64
#define TF_CHUNK_SHIFT_DEFAULT 20
#define TF_CHUNK_SHIFT_MIN 8
#define TF_CHUNK_SHIFT_MAX 24
/* The file-system block that given-back space is counted in: a run of
 * appended bytes that may be given back starts at a multiple of it
 * (tf_container_append_retirable), and punching gives back whole ones. */
#define TF_PUNCH_BLOCK 4096u

typedef struct {
    uint64_t seq;          /* commit number, from 1 */
    uint64_t catalog_off;  /* stored (compressed) segment */
    uint64_t catalog_len;
    uint64_t catalog_hash; /* XXH3-64 of the stored segment */
    uint64_t prev;         /* offset of the previous trailer, 0 for none */
    uint64_t nblobs;       /* blobs in the archive after this commit */
} tf_trailer;

typedef struct {
    tf_io *io;           /* its bytes: a local file or a remote object */
    char *name;          /* for messages: its path, a URL without secrets */
    bool writable;
    unsigned version;    /* TF_FORMAT_* */
    unsigned chunk_shift;
    uint64_t end;        /* end of the last valid commit (or superblock) */
    uint64_t file_size;  /* size when opened or last polled (a torn tail
                          * may follow end) */
    uint64_t searched;   /* read-only: bytes searched for trailers */
    bool has_commit;
    tf_trailer last;     /* valid when has_commit */
    bool retirable_run;  /* the last append was tf_container_append_retirable's */
    /* Appended bytes not yet written, at pending_off: written in one
     * call once they fill the buffer, before a gap, or at the commit.
     * Nothing reads them before: they follow `end`, which every blob
     * and catalog a reader knows precedes. */
    tf_buf pending;
    uint64_t pending_off;
    struct ZSTD_CCtx_s *cctx; /* the commits', kept: a context made for
                                 each would be mapped and cleared anew */
    bool trailer_unsynced; /* the last commit's trailer is not known durable */
    tf_behind *behind;     /* writes commits behind (TF_COMMIT_BEHIND); NULL
                              until the first */
    uint64_t durable_end;  /* end of the last commit known durable */
    tf_error broken;       /* a commit written behind failed: every write
                              after it fails so (errnum 0: none did) */
    /* tf_container_frames': commits 1..nframes, each (start of its
     * catalog, end of its trailer), once asked for. */
    uint64_t *frames;
    uint64_t nframes, frames_cap;
} tf_container;

/* How tf_container_commit makes a commit durable. */
typedef enum {
    /* Synced before it returns. */
    TF_COMMIT_DURABLE,
    /* Written and synced by the container's thread (format/behind.h)
     * while the caller goes on: its blobs, a sync, its trailer, a sync.
     * The next commit, sync or rollback waits for it; a failure is
     * theirs to report, and every write after it fails. The caller
     * applies the commit at once: its bytes read from the job until
     * they are written. Storage whose appends are ordered (io/io.h:
     * object storage) has it made durable instead. */
    TF_COMMIT_BEHIND,
} tf_commit_mode;

/* Creates a new, empty archive of a format version (fails if path
 * exists); remote: a URL's settings (NULL: the defaults). */
int tf_container_create(const char *path, const tf_remote_opts *remote, unsigned chunk_shift,
                        unsigned version, tf_error *e);
/* Opens an archive (o NULL: read-only, default settings) and finds its
 * last valid commit. o->writable also takes the single-writer lock
 * (non-blocking: a second writer gets a clear error) and cuts a torn tail
 * off so appends follow the last commit. A path that is a URL (io/io.h)
 * opens a remote archive, read-only, whose last commit must be at its
 * very end. */
int tf_container_open(tf_container *c, const char *path, const tf_open_opts *o, tf_error *e);
void tf_container_close(tf_container *c);

/* Read-only: whether the file grew by a commit since it was opened or
 * last polled. Polls its size and identity (io/io.h; a remote archive:
 * one request, following the object as io/remote.h says) and searches
 * only the bytes new since then, backwards as an open searches a torn
 * tail (storage that does not tear: only its end, a trailer there or
 * none): *found tells whether a valid trailer starts there, the newest
 * in *t at *at. end and last stay those of the last commit the caller
 * applied. A tail without a valid trailer (a commit being written, or
 * one torn) is searched once, and again only once it has grown or its
 * identity changed. */
int tf_container_poll(tf_container *c, tf_trailer *t, uint64_t *at, bool *found, tf_error *e);

/* Reads exactly len bytes at off; a short file is an error. */
int tf_container_pread(const tf_container *c, uint64_t off, void *buf, size_t len, tf_error *e);
/* Reads exactly len bytes at off that must have the XXH3-64 hash: 0, 1
 * when they do not (e untouched), -1 when they cannot be read. Bytes
 * that fail are forgotten (io/io.h) and, where copies were kept (a
 * remote archive's), read once more first: a damaged response or cache
 * entry is never served. */
int tf_container_pread_checked(const tf_container *c, uint64_t off, void *buf, size_t len,
                               uint64_t hash, tf_error *e);
/* The bytes at [off, off + len) will be read soon (a hint): the page
 * cache starts reading them, a remote archive fetches them with the
 * next read that fetches. */
void tf_container_will_need(const tf_container *c, uint64_t off, uint64_t len);
/* Reads the trailer at off; 0 if it is valid. */
int tf_container_read_trailer(const tf_container *c, uint64_t off, tf_trailer *t, tf_error *e);
/* What a walk of trailers (tf_container_walk_trailers) does with each:
 * the one at off; a failure ends the walk with it. */
typedef int (*tf_trailer_visit)(void *arg, uint64_t off, const tf_trailer *t, tf_error *e);
/* Reads the trailers from the one at off, of commit top, back to that of
 * commit from + 1 (none when from >= top), each where the one after it
 * names: one that is not the commit expected fails (EIO, "trailer chain
 * broken"), and a read that fails says for which commit. visit, unless
 * NULL, sees each, the newest first. *before: where commit from's
 * trailer must then be (0 before commit 1), for the caller to check
 * against what it knows. */
int tf_container_walk_trailers(const tf_container *c, uint64_t off, uint64_t top, uint64_t from,
                               tf_trailer_visit visit, void *arg, uint64_t *before, tf_error *e);
/* A commit's trailer and where it is. */
typedef struct {
    uint64_t off;
    tf_trailer t;
} tf_commit_at;
/* The trailers of commits from + 1 to top (its trailer at off, top >
 * from), oldest first, into *out (the caller frees it), by the walk
 * above, whose *before it gives. Fails (EIO) when top claims more
 * commits than the bytes up to its trailer can hold: what is allocated
 * is bounded by the archive's size. */
int tf_container_collect_trailers(const tf_container *c, uint64_t off, uint64_t top,
                                  uint64_t from, tf_commit_at **out, uint64_t *before,
                                  tf_error *e);
/* Where each commit's catalog (segment or root) starts and its trailer
 * ends, the oldest first: *n pairs at *frames (valid until the next
 * call or the close). The first call reads every trailer, later ones
 * only those of the commits since: a writer asks after each commit. */
int tf_container_frames(tf_container *c, const uint64_t **frames, uint64_t *n, tf_error *e);
/* Reads and decompresses the catalog segment a trailer points to
 * (format version 1). */
int tf_container_read_catalog(const tf_container *c, const tf_trailer *t, tf_buf *out, tf_error *e);

/* Writer side: appends bytes after `end` (not yet committed); returns the
 * offset they were written at through *off. */
int tf_container_append(tf_container *c, const void *p, size_t len, uint64_t *off, tf_error *e);
/* Appends bytes that a later commit may retire (a payload that a
 * redirect replaces, given back with tf_container_punch), as
 * tf_container_append does, but a run of them (no other append between)
 * starts at a multiple of TF_PUNCH_BLOCK: the bytes skipped are never
 * written, and the blocks the run fills hold no bytes that stay, so
 * once all of a run is retired all its blocks but its last (shared with
 * what follows) are given back. Blobs need not be contiguous: a catalog
 * names each payload by offset and length, and nothing reads the bytes
 * between (format/catalog.h). */
int tf_container_append_retirable(tf_container *c, const void *p, size_t len, uint64_t *off,
                                  tf_error *e);
/* Commits: fsync, append the compressed segment and trailer, and fsync
 * as mode says. *previous_synced (unless NULL) tells whether this made
 * the previous commit's trailer durable (it was written behind). On
 * failure the appended tail is cut off again and the
 * archive is as its last durable commit left it. */
int tf_container_commit(tf_container *c, const uint8_t *segment, size_t len, uint64_t nblobs,
                        tf_commit_mode mode, bool *previous_synced, tf_error *e);
/* Makes everything appended durable: *synced tells whether that made a
 * trailer written behind durable (after a failure, none is ever said
 * to be). */
int tf_container_sync(tf_container *c, bool *synced, tf_error *e);
/* Drops everything appended since the last commit (since the last
 * durable one, after a commit written behind failed). */
void tf_container_rollback(tf_container *c);
/* Writer side, a copy of another archive's commits (trajpack push):
 * appends the bytes of `from` from this archive's end up to `end`, the
 * end of one of from's commits, as they lie there (the two archives
 * hold the same bytes below this one's end), and publishes them, seen
 * whole (io/io.h); the last commit is then the one ending at end. On
 * failure nothing of them is kept. */
int tf_container_copy_commits(tf_container *c, const tf_container *from, uint64_t end, tf_error *e);
/* Writer side, storage that keeps an archive as generations (object
 * storage; io/io.h seal and replace, ENOTSUP elsewhere): no commit from
 * now on; then the archive made the size bytes of the file fd, whole. */
int tf_container_seal(tf_container *c, tf_error *e);
int tf_container_replace(tf_container *c, int fd, uint64_t size, tf_error *e);
/* Gives back the space of the whole TF_PUNCH_BLOCKs within committed
 * bytes [off, off + len) that no committed state reads (io/io.h punch);
 * the partial blocks at either end stay as they are. ENOTSUP where the
 * storage cannot. */
int tf_container_punch(tf_container *c, uint64_t off, uint64_t len, tf_error *e);

#endif
