/* Open files of a mount, by file handle (the fh the kernel echoes back).
 *
 * A read handle holds the version of the file it opened: a catalog entry
 * that later commits do not change, so a reader sees one version from
 * open to close.
 *
 * A write handle holds a private copy of the file in a spool file (session
 * semantics, as in AFS): writes go there, and a commit makes it the
 * file's content (see commit_jobs.h); two writers of one file each commit
 * their own copy, and the last commit wins. Until its first commit a new
 * file has no name: lookups do not find it, so nobody can open, rename or
 * remove it but through its descriptors. The handle commits at the path
 * named by a directory inode and a name, which renames and removals of
 * the committed file made through the mount update. */
#ifndef TRAJFS_FS_HANDLES_H
#define TRAJFS_FS_HANDLES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "store/archive.h"
#include "fs/stream_state.h"
#include "store/prefetch.h"

/* What a write handle would commit (a snapshot of its fields). */
typedef struct {
    uint64_t ino, size;
    uint64_t parent; /* directory inode */
    uint32_t mode;   /* permission bits */
    struct timespec mtime;
} fs_write_attrs;

typedef struct {
    uint64_t ino;
    bool writable;
    bool bypass_cache;  /* its reads and writes bypass the kernel's page
                         * cache (fs_handles_add) */
    /* read handles: the version opened, `copy` when it is a private copy
     * (in a read-write mount the catalog's entries move and change) */
    const tf_entry *ent;
    tf_entry copy;
    tf_prefetch_cursor ahead; /* what its reads had decoded ahead */
    /* write handles */
    uint64_t serial;    /* unique to this handle, whatever fh it gets */
    pthread_mutex_t io; /* its spool's I/O, against a commit of the spool
                         * (fs_handle_hold); only handles.c takes it */
    int spool;
    fs_stream_state stream; /* encoding while it is written (stream.h) */
    /* Write handles, under the table's lock: */
    fs_write_attrs attrs;
    char name[TF_NAME_MAX + 1]; /* in directory attrs.parent */
    bool dirty;         /* changed since the last commit */
    bool failed;        /* its last commit failed, and the caller was told */
    bool unlinked;      /* its name was removed: nothing to commit */
    bool flushed;       /* closed (a flush came) and not written since */
    uint64_t changed;   /* when it last changed (table order), to pick
                         * among several handles of one inode */
} fs_handle;

/* Versions of files that left the tree (unlinked, or replaced by a rename
 * over them), the last FS_RETIRED_MAX: an open or fstat by inode that
 * raced with the change still finds the file, as on a local file system
 * (the kernel resolved the name before the change, and asks after it). */
#define FS_RETIRED_MAX 16
typedef struct {
    uint64_t ino; /* 0: unused */
    tf_entry ent; /* a private copy */
} fs_retired;

typedef struct {
    pthread_mutex_t lock;
    fs_handle **slots; /* fh - 1 indexes it; NULL when free */
    size_t nslots;
    uint64_t clock;    /* counts changes, for fs_handle.changed */
    fs_retired retired[FS_RETIRED_MAX];
    size_t next_retired; /* the slot the next one takes */
} fs_handles;

void fs_handles_init(fs_handles *t);
/* Frees every handle left (their files were never closed); returns how
 * many write handles had changes that were never committed. */
size_t fs_handles_destroy(fs_handles *t);

/* A new read handle for the entry (copied when copy is true), or a new
 * write handle on the spool file (owned from now on) committing at name
 * (at most TF_NAME_MAX bytes) in directory attrs->parent; one whose spool
 * starts empty (dirty) may be encoded as it is written. NULL when out of
 * memory. */
fs_handle *fs_handle_new_read(uint64_t ino, const tf_entry *ent, bool copy);
fs_handle *fs_handle_new_write(const fs_write_attrs *attrs, const char *name, int spool,
                               bool dirty);
void fs_handle_free(fs_handle *h);

/* Puts h in the table; returns its fh, 0 when out of memory.
 *
 * The kernel keeps one page cache per inode, for all its descriptors:
 * it may hold the view of one version of the file only. So h bypasses
 * it (h->bypass_cache, direct I/O) when another handle of the inode uses
 * it for another view: a write handle in use (its pages hold writes not
 * committed), or a read handle of another version, or for a write
 * handle any read handle (its writes would show there). A write handle
 * that was closed with nothing left to commit holds the committed file:
 * it is not in use. */
uint64_t fs_handles_add(fs_handles *t, fs_handle *h);
/* The handle fh of inode ino, or NULL (a bad fh or the wrong inode). */
fs_handle *fs_handles_get(fs_handles *t, uint64_t fh, uint64_t ino);
/* Takes handle fh out of the table (the caller frees it). */
fs_handle *fs_handles_take(fs_handles *t, uint64_t fh);
/* Calls fn(arg, ent) for the version each read handle reads, under the
 * table's lock. */
void fs_handles_each_version(fs_handles *t, void (*fn)(void *arg, const tf_entry *ent), void *arg);

/* ---- write handles ---- */

/* pwrite to h's spool, pread from it, ftruncate of it (the spool's I/O
 * under h->io): 0 or an errno value. A write or truncation marks h
 * changed and is noted for its stream; a read past the spool's end gives
 * fewer bytes (*got). */
int fs_handle_write(fs_handles *t, fs_handle *h, const void *buf, size_t len, uint64_t off);
int fs_handle_truncate(fs_handles *t, fs_handle *h, uint64_t size);
int fs_handle_read(fs_handle *h, void *buf, size_t len, uint64_t off, size_t *got);
/* Holds h's spool as it is, for a commit of it: writes and truncations
 * wait until fs_handle_unhold (those before were all noted). */
void fs_handle_hold(fs_handle *h);
void fs_handle_unhold(fs_handle *h);

/* The attributes of the most recently changed write handle of ino, the
 * writer's view of the file; false when it has none. */
bool fs_handles_attrs(fs_handles *t, uint64_t ino, fs_write_attrs *out);
/* The attributes (size, mode, mtime) of a version of ino that left the
 * tree, as an open read handle or the retired versions hold it; false
 * when none does. */
bool fs_handles_read_attrs(fs_handles *t, uint64_t ino, fs_write_attrs *out);
/* Keeps a copy of the regular file ent, inode ino, that a change is about
 * to remove from the tree (the oldest version kept goes). */
void fs_handles_retire(fs_handles *t, uint64_t ino, const tf_entry *ent);
/* A new read handle of the retired version of ino; NULL when none is
 * kept (or out of memory). */
fs_handle *fs_handles_open_retired(fs_handles *t, uint64_t ino);
/* New permission bits and/or modification time (NULL: unchanged) for
 * every write handle of ino. */
void fs_handles_set_attrs(fs_handles *t, uint64_t ino, const uint32_t *mode,
                          const struct timespec *mtime);
/* A flush (a close) of h came: h is at rest once nothing is left to
 * commit, until it is written again. */
void fs_handles_note_flush(fs_handles *t, fs_handle *h);
/* Snapshot of what h would commit: false when there is nothing to
 * commit (clean, or unlinked); with unreported, also when its last
 * failure was reported already. */
bool fs_handles_pending_commit(fs_handles *t, fs_handle *h, bool unreported,
                               fs_write_attrs *attrs, char name[TF_NAME_MAX + 1]);
/* The outcome of a commit of the snapshot taken before (no change can
 * come in between: the caller holds h, fs_handle_hold). */
void fs_handles_committed(fs_handles *t, fs_handle *h, bool ok);

/* A committed file was renamed or removed: its write handles commit at
 * its new name, or not at all. (A file not committed yet has no name the
 * kernel could rename or remove.) */
void fs_handles_move_ino(fs_handles *t, uint64_t ino, uint64_t parent, const char *name);
void fs_handles_unlink_ino(fs_handles *t, uint64_t ino);

#endif
