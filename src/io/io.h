/* The bytes of an archive, wherever they are: one interface, a table of
 * operations, implemented by a local file (io/file.c) and by a remote
 * object read by byte ranges (io/remote.h). The container (format/)
 * reads, follows and appends through it and never knows which it has.
 *
 * Reading: pread, will_need (a hint), poll (size and identity, to follow
 * a file others append to). Writing: lock (one writer), append after
 * the end, sync (durable), publish (the bytes appended end a commit:
 * durable, and seen by readers, as a whole), truncate (drop what was
 * appended since), punch (give back the space of committed bytes no
 * committed state reads any more). A local file publishes by a sync.
 * An archive in object storage (io/s3_writer.h) stages what is appended
 * and publishes it as one new object, created only where none is: of
 * two writers on the same tail, the second one's publish fails.
 *
 * The reading operations may be called from many threads at once, the
 * writing ones from the single writer's. */
#ifndef TRAJFS_IO_IO_H
#define TRAJFS_IO_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "io/remote_opts.h"

typedef struct tf_io tf_io;

/* The operations of one kind of storage. Those marked optional may be
 * NULL (tf_io_* below then does nothing, or fails with ENOTSUP). */
typedef struct {
    /* A crash or a full disk can leave part of an append at the end (a
     * local file). An object is published whole: bytes after its last
     * commit are damage, not a torn tail. */
    bool tears;
    /* Its bytes come over a network (no local file to watch). */
    bool remote;
    /* Appends come in the order of their offsets, one at a time, and a
     * publish takes all that came before it (object storage: a commit is
     * one object): no commit is written while the next one appends. */
    bool ordered;
    /* Reads exactly [off, off + len); an error when not all are there. */
    int (*pread)(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e);
    /* Optional: [off, off + len) will be read soon. A hint only. */
    void (*will_need)(tf_io *io, uint64_t off, uint64_t len);
    /* Optional: drops every copy kept of [off, off + len) (they failed a
     * checksum); true when a read of them may now bring other bytes. */
    bool (*forget)(tf_io *io, uint64_t off, uint64_t len);
    /* The size now, and whether its identity (a local file's
     * modification time, a remote object's ETag) changed since it was
     * opened or last polled: then, even at the same size, other bytes
     * than before may be where bytes were. */
    int (*poll)(tf_io *io, uint64_t *size, bool *changed, tf_error *e);
    /* Optional: the n bytes ending at end are a valid commit's trailer,
     * the newest: what grows after them is an append, not another file
     * (a remote object followed checks new versions against them). */
    void (*anchor)(tf_io *io, uint64_t end, const uint8_t *bytes, size_t n);
    /* What the file system says of it: owner, mode, times, which file. A
     * remote object: the reading user's, regular, dated now. */
    int (*stat)(tf_io *io, struct stat *st, tf_error *e);
    /* Optional: the bytes free where appends go. */
    int (*free_space)(tf_io *io, uint64_t *bytes, tf_error *e);
    /* Optional (writable): the single-writer lock, not waiting (EBUSY
     * while another writer holds it); held until close. */
    int (*lock)(tf_io *io, tf_error *e);
    /* Optional (writable): writes the len bytes at off, the end. */
    int (*append)(tf_io *io, const void *p, size_t len, uint64_t off, tf_error *e);
    /* Optional (writable): what was appended is durable (object storage:
     * nothing is before its publish, which makes it durable whole). */
    int (*sync)(tf_io *io, tf_error *e);
    /* Optional (writable; NULL: sync): what was appended ends a commit,
     * the bytes after the last publish; durable and seen by readers at
     * once, all or none of them. EBUSY: another writer published there
     * first (nothing of these bytes is kept). */
    int (*publish)(tf_io *io, tf_error *e);
    /* Optional (writable): the end is size, what followed dropped. */
    int (*truncate)(tf_io *io, uint64_t size, tf_error *e);
    /* Optional (writable): gives back the space of [off, off + len),
     * which then reads as zeros; the size stays. ENOTSUP where the
     * storage cannot (the caller keeps working without). */
    int (*punch)(tf_io *io, uint64_t off, uint64_t len, tf_error *e);
    /* Optional (writable; storage that keeps an archive as generations,
     * object storage): seal makes the archive take no commit from now
     * on (EBUSY when one came first; sealed already is no error);
     * replace makes the size bytes of the file fd the archive, whole and
     * at once, as a new generation, then deletes the old one. */
    int (*seal)(tf_io *io, tf_error *e);
    int (*replace)(tf_io *io, int fd, uint64_t size, tf_error *e);
    /* Optional: ends the transfers under way at once, and fails every
     * later read that must fetch (ECANCELED): the storage is about to be
     * closed, and no one waits for a slow server's timeouts. */
    void (*cancel)(tf_io *io);
    void (*close)(tf_io *io);
} tf_io_ops;

/* Every implementation's object starts with this. */
struct tf_io {
    const tf_io_ops *ops;
};

/* How to open an archive. */
typedef struct {
    bool writable;                /* for appending, by its single writer */
    bool check_all;               /* read every record of the catalog and check
                                     them all, as a writer does (verify) */
    bool lazy_bodies;             /* read-only, format version 2: read an entry's
                                     body when it is asked for
                                     (tf_archive_entry_body), not at the open
                                     (a writer of an archive that holds
                                     commits does, unless check_all) */
    const tf_remote_opts *remote; /* a URL's settings; NULL: the defaults */
    size_t catalog_cache;         /* format version 2: bytes of decoded catalog
                                     pages kept in memory (0: the default,
                                     TF_CATALOG_CACHE_DEFAULT) */
} tf_open_opts;

#define TF_CATALOG_CACHE_DEFAULT ((size_t)16 << 20)

/* Whether path names a remote object: its URL (http://, https://,
 * s3://), or where its URL is kept, out of sight of other users (a
 * command line is not: ps shows it): url-env:NAME, the environment
 * variable NAME; url-file:PATH, the first line of the file PATH. */
bool tf_io_is_url(const char *path);
/* The name of path for messages and mount options: a local file's
 * absolute path, a URL without user, password, query (a presigned URL's
 * signature) and fragment, url-env:NAME and url-file:PATH as they are.
 * NULL (errno) when it cannot be had. */
char *tf_io_display_name(const char *path);
/* path as messages and logs may show it (malloc'd, NULL when out of
 * memory): a URL without user and password, query (a presigned URL's
 * signature) and fragment; anything else (a local path, url-env:NAME)
 * as it is. */
char *tf_io_shown_name(const char *path);

/* Opens path (o NULL: read-only, default settings): a local file, or a
 * URL (writable: s3:// only). */
int tf_io_open(const char *path, const tf_open_opts *o, tf_io **out, tf_error *e);
/* Creates the archive path holding exactly the len bytes, durably (a
 * local file's directory entry too); fails when path exists; on failure
 * leaves nothing behind. remote: a URL's settings (NULL: the
 * defaults). */
int tf_io_create(const char *path, const tf_remote_opts *remote, const void *bytes, size_t len,
                 tf_error *e);
void tf_io_close(tf_io *io); /* NULL: nothing */

bool tf_io_tears(const tf_io *io);
bool tf_io_is_remote(const tf_io *io);
bool tf_io_ordered(const tf_io *io);
int tf_io_pread(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e);
void tf_io_will_need(tf_io *io, uint64_t off, uint64_t len);
bool tf_io_forget(tf_io *io, uint64_t off, uint64_t len);
int tf_io_poll(tf_io *io, uint64_t *size, bool *changed, tf_error *e);
void tf_io_anchor(tf_io *io, uint64_t end, const uint8_t *bytes, size_t n);
int tf_io_stat(tf_io *io, struct stat *st, tf_error *e);
int tf_io_free_space(tf_io *io, uint64_t *bytes, tf_error *e);
int tf_io_lock(tf_io *io, tf_error *e);
int tf_io_append(tf_io *io, const void *p, size_t len, uint64_t off, tf_error *e);
int tf_io_sync(tf_io *io, tf_error *e);
int tf_io_publish(tf_io *io, tf_error *e);
int tf_io_truncate(tf_io *io, uint64_t size, tf_error *e);
int tf_io_punch(tf_io *io, uint64_t off, uint64_t len, tf_error *e);
int tf_io_seal(tf_io *io, tf_error *e);
int tf_io_replace(tf_io *io, int fd, uint64_t size, tf_error *e);
void tf_io_cancel(tf_io *io);

#endif
