/* Replacing an archive with a rewritten copy of it (gc, repack): the new
 * archive is written beside the old one, made durable and checked, then
 * renamed over it, all under the writer's lock of the old one: a crash
 * at any point leaves either archive whole, and readers that have the
 * old one open keep reading it. */
#ifndef TRAJFS_STORE_REWRITE_H
#define TRAJFS_STORE_REWRITE_H

#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "format/catalog.h"
#include "store/archive.h"

typedef struct {
    char *real;      /* the archive's path, symbolic links resolved */
    tf_archive *old; /* open as its single writer: the lock, held to the end */
    const char *tmp_suffix;
} tf_rewrite;

/* Opens the local archive at path as its single writer (EBUSY while
 * another writer has it) for a rewrite by verb ("gc"), whose temporary
 * file is path + tmp_suffix (".gc-tmp"). A URL is refused: a remote
 * archive has no file to replace. */
int tf_rewrite_open(tf_rewrite *rw, const char *path, const char *verb, const char *tmp_suffix,
                    tf_error *e);
void tf_rewrite_close(tf_rewrite *rw);

/* What a rewrite writes and checks. */
typedef struct {
    /* Fills the new archive at tmp, created empty (chunks of 2^shift
     * elements, the old archive's owner and mode), commits durably and
     * closes it. */
    int (*write)(void *arg, const char *tmp, tf_error *e);
    /* Whether the new archive, opened, holds what it should. */
    int (*check)(void *arg, const tf_archive *written, tf_error *e);
    void *arg;
} tf_rewrite_steps;

/* Writes the new archive at the temporary path (removing what a rewrite
 * that died left there), checks it, renames it over the archive and
 * makes the rename durable; after: the new file's stat. On failure the
 * temporary file is removed and the archive is as it was. */
int tf_rewrite_replace(tf_rewrite *rw, unsigned shift, const tf_rewrite_steps *steps,
                       struct stat *after, tf_error *e);

/* The entry a rewrite holding the old archive's live entries starts
 * with so that no inode number ever given is given again: a tombstone
 * carrying the highest one when no live entry does (applied to an empty
 * archive, it removes nothing). 1 with *out filled in (the caller's to
 * free), 0 when the live entries carry the counter, -1 when out of
 * memory. */
int tf_rewrite_ino_keeper(const tf_archive *old, tf_entry *out, tf_error *e);

/* Whether the new archive, opened, has the old one's live entries with
 * their paths, kinds, inode numbers, modes, times and sizes, and its
 * inode counter. */
int tf_rewrite_check_entries(const tf_archive *old, const tf_archive *written, tf_error *e);

#endif
