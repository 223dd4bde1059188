/* One commit being built by the archive's writer: the entries it adds or
 * replaces and the blobs it appends. Blobs go to the end of the archive
 * file as they come; tf_commit_finish makes the commit durable and applies
 * it to the in-memory catalog, tf_commit_abort cuts the appended bytes off
 * again and the archive is as before. One commit at a time per archive.
 *
 * The tf_commit_* edits below check the catalog as committed before this
 * commit: each commit holds one of them. */
#ifndef TRAJFS_STORE_COMMIT_H
#define TRAJFS_STORE_COMMIT_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/idmap.h"
#include "format/catalog.h"
#include "store/archive.h"
#include "store/writer.h"

typedef struct {
    tf_archive *ar;
    const tf_write_opts *opts;  /* for its hooks */
    _Atomic uint64_t *next_ino; /* the writer's inode counter */
    tf_segment seg;
    uint64_t blobs_cap, entries_cap, redirects_cap;
    /* The blobs of its redirects, in redirect order: they go after every
     * other blob of the segment at the commit (format version 2 gives
     * them no slot of their own, and the others' indices, which readers
     * may have cached meanwhile, must not move). */
    tf_blob *serving;
    uint64_t serving_cap;
    tf_idmap pending; /* ids of the blobs this commit appends */
    uint64_t *redirected;   /* a bit per stored slot: redirected by this
                               commit (allocated at its first redirect) */
    /* Small payloads held back from a run of retirable ones
     * (tf_blob_in_retirable_run): their bytes, one after another, and
     * their records (an index in seg.blobs, or HELD_SERVING and one in
     * serving); written before the next payload that stays and is not
     * small, or at the commit. */
    tf_buf held;
    uint64_t *held_blobs;
    uint64_t nheld, held_cap;
    tf_error give_back;     /* after tf_commit_finish: why the space it
                               retired was not all given back (errnum 0:
                               it was) */
    bool dropped;           /* after tf_commit_finish: it removed or
                               replaced files, or rebased chunks
                               (tf_archive_segment_drops) */
    bool kept_open;         /* after tf_commit_finish: data only open
                               versions read was not given back
                               (tf_write_opts.open_versions) */
} tf_commit;

void tf_commit_begin(tf_commit *c, tf_archive *ar, const tf_write_opts *opts,
                     _Atomic uint64_t *next_ino);
/* Makes the commit durable, then applies it to the archive's in-memory
 * catalog between the hooks opts->applied. Frees the
 * commit; on failure the archive file is as before. */
int tf_commit_finish(tf_commit *c, tf_error *e);
/* Drops the commit and the bytes it appended. */
void tf_commit_abort(tf_commit *c);

/* Gives back (store/give_back.h) the space of the payloads that the
 * last commit's redirects retired (tf_archive_retired) and of the ndead
 * payloads in dead (that no live file needs any more), once the commit
 * that left them is durable; with live (the archive's liveness now, or
 * NULL), the whole gaps around them. -1, the first failure in e: the
 * space stays in use until trajpack gc. */
int tf_commit_give_back(tf_archive *ar, const uint8_t *live, const tf_archive_range *dead,
                        size_t ndead, tf_error *e);

/* tf_commit_give_back of what the last commit applied retired, once it
 * is durable (after its own sync, a later one, or, at a writer's open,
 * for a writer that died before giving it back). */
int tf_commit_give_back_last(tf_archive *ar, tf_error *e);

/* Marks in live (store/liveness.h) what the open versions of
 * opts->open_versions read: 1 when that kept data that live files do not
 * need, 0 when not, -1 with the reason (then live may be given back by
 * none). */
int tf_commit_keep_open_versions(const tf_archive *ar, const tf_write_opts *opts, uint8_t *live,
                                 tf_error *e);

/* Adds an entry of the given kind at path. attrs NULL: mode 0755, the
 * current time, and a new inode number (a directory added again keeps
 * its number). The returned entry is the commit's, to be filled in. */
tf_entry *tf_commit_entry(tf_commit *c, const char *path, uint8_t kind,
                          const tf_entry_attrs *attrs, tf_error *e);
/* Adds directory entries for the ancestors of path the archive lacks;
 * ENOTDIR when one of them is not a directory. */
int tf_commit_parents(tf_commit *c, const char *path, tf_error *e);

/* Whether ent, applied to the archive as it is, changes the names in its
 * directory: a new name, a removal, or another inode under the name. */
bool tf_commit_changes_names(const tf_archive *ar, const tf_entry *ent);

/* Global index of a blob with this content, stored or appended by this
 * commit, or -1. */
int64_t tf_commit_find_blob(const tf_commit *c, const tf_blob_id *id);
/* Appends a blob's payload and records it. Returns its global index, or
 * -1. */
int64_t tf_commit_store_blob(tf_commit *c, const tf_blob_id *id, const tf_buf *payload,
                             uint64_t raw_len, uint8_t codec, uint8_t dtype, uint64_t ref,
                             uint64_t model, tf_error *e);
/* A codec's model made ready to store like opaque bytes, compressed when
 * that is smaller: made by the thread that fitted it (any thread), so
 * that the commit's thread, which stores every chunk in turn, only looks
 * it up and appends it. */
typedef struct {
    tf_blob_id id; /* of the model's bytes */
    uint64_t raw_len;
    uint8_t codec;
    tf_buf out;
} tf_model_blob;

int tf_model_blob_make(const tf_buf *model, tf_model_blob *m, tf_error *e);
/* A copy of src, for another chunk that uses the same model. */
int tf_model_blob_copy(const tf_model_blob *src, tf_model_blob *dst, tf_error *e);
void tf_model_blob_free(tf_model_blob *m);
/* Stores a model once, however many chunks use it (a stored blob of the
 * same bytes that decodes alone serves). Returns its global index, or
 * -1. */
int64_t tf_commit_store_model_blob(tf_commit *c, const tf_model_blob *m, tf_error *e);
/* A rebase's model (store/rebase.h), stored in this commit as it is.
 * Not looked up among the archive's blobs: their
 * id index, built at its first lookup (a liveness walk, and 24 bytes or
 * more a blob), is what a removal would otherwise build for it alone,
 * and a model fitted on one rebased chunk is seldom stored already. */
int64_t tf_commit_store_rebased_model(tf_commit *c, const tf_model_blob *m, tf_error *e);
/* Stores a self-contained tensor chunk (no reference, no model) of the
 * newest checkpoint. With retire_soon (the writer expects the next
 * commit to retire it: its predecessor's was), a chunk too small to be
 * in the run of retirable payloads by itself (tf_blob_in_retirable_run)
 * goes there all the same, to be given back with its neighbours. */
int64_t tf_commit_store_keyframe(tf_commit *c, const tf_blob_id *id, const tf_buf *payload,
                                 uint64_t raw_len, uint8_t codec, uint8_t dtype,
                                 bool retire_soon, tf_error *e);

/* Appends a new payload for the stored blob `slot` (its content: the
 * same id, length and dtype) and redirects the slot to it (format/
 * catalog.h): a keyframe re-encoded as a delta against ref, with model
 * (blobs + 1, 0 for none), or a chunk re-encoded against another
 * reference (a rebase: a slot redirected before makes the segment one of
 * version 3). A slot this commit redirected already keeps its first; a
 * model, or a slot that serves another, is refused (EINVAL). Returns 0,
 * or -1. */
int tf_commit_redirect(tf_commit *c, uint64_t slot, const tf_buf *payload, uint8_t codec,
                       uint64_t ref, uint64_t model, tf_error *e);

/* ---- edits of the tree (each fails with an errno-style reason) ---- */

/* A new directory or symbolic link; EEXIST when path exists. */
int tf_commit_mkdir(tf_commit *c, const char *path, const tf_entry_attrs *attrs, tf_error *e);
int tf_commit_symlink(tf_commit *c, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e);
/* A tombstone: path and everything below it go; ENOENT when absent. */
int tf_commit_remove(tf_commit *c, const char *path, tf_error *e);
/* Moves the entry at from, with everything below it, to `to`, keeping
 * inode numbers and contents, replacing what `to` holds (rename(2)'s
 * rules: ENOENT, EINVAL for a move into itself, ENOTDIR, EISDIR,
 * ENOTEMPTY). */
int tf_commit_move(tf_commit *c, const char *from, const char *to, tf_error *e);
/* The entry at path with new permission bits and modification time. */
int tf_commit_set_attrs(tf_commit *c, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e);

#endif
