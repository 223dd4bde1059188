/* An open archive: the container plus the catalog of all commits applied
 * in order, as an index of live entries sorted by path and a global blob
 * table. Opening reads only trailers and catalog segments. */
#ifndef TRAJFS_STORE_ARCHIVE_H
#define TRAJFS_STORE_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
/* What the archive's users above store/ get with it: the entries and
 * blobs it returns (format/catalog.h); the open options and the bounds
 * of its chunk size, TF_CHUNK_SHIFT_MIN..MAX (format/container.h). */
#include "format/catalog.h"
#include "format/container.h"

typedef struct tf_archive tf_archive;

/* Opens an archive, a path or a URL, with the options o (io/io.h; NULL:
 * read-only, a remote archive's default settings): read-only, or, with
 * o->writable, as its single writer (EBUSY while another writer has it). */
int tf_archive_open(const char *path, const tf_open_opts *o, tf_archive **out, tf_error *e);
void tf_archive_close(tf_archive *ar);

unsigned tf_archive_chunk_shift(const tf_archive *ar);
unsigned tf_archive_format(const tf_archive *ar); /* TF_FORMAT_* */
uint64_t tf_archive_commits(const tf_archive *ar); /* commits applied */
uint64_t tf_archive_file_size(const tf_archive *ar); /* bytes committed */
/* Bytes after the last commit, as last looked at: an interrupted write's,
 * ignored (a writer cuts them off). */
uint64_t tf_archive_torn_bytes(const tf_archive *ar);
tf_container *tf_archive_container(tf_archive *ar);

/* Whether its bytes come over a network (an http(s):// or s3:// URL). */
bool tf_archive_is_remote(const tf_archive *ar);
/* What the file system says of the archive's file now: its owner, mode,
 * times and which file it is. A remote archive: the reading user's,
 * dated now. */
int tf_archive_stat(const tf_archive *ar, struct stat *st, tf_error *e);
/* The bytes the disk holds of a local archive whose stat is st: less than
 * its size where retired blobs were given back as holes (st_blocks counts
 * 512-byte units, whatever st_blksize says). */
static inline uint64_t tf_archive_allocated(const struct stat *st)
{
    return (uint64_t)st->st_blocks * 512;
}
/* The bytes free where commits are appended (a local file's file
 * system). */
int tf_archive_free_space(const tf_archive *ar, uint64_t *bytes, tf_error *e);
/* Ends the remote fetches under way at once (the archive is about to
 * be closed: no one waits for a slow server's timeouts); later reads
 * that must fetch fail. Nothing for a local archive. */
void tf_archive_cancel_fetches(tf_archive *ar);

/* Live entries (tombstoned and replaced ones removed), sorted so that a
 * directory's whole subtree follows it contiguously ('/' sorts first). */
size_t tf_archive_nentries(const tf_archive *ar);
const tf_entry *tf_archive_entry(const tf_archive *ar, size_t i);
/* The entry at path ("" or "." is the root, which has no entry: NULL). */
const tf_entry *tf_archive_lookup(const tf_archive *ar, const char *path);
/* Index of the entry at path in the sorted order, or -1. */
long tf_archive_find(const tf_archive *ar, const char *path);
/* Number of entries at and below index i: a directory's subtree follows
 * it in the sorted order. */
size_t tf_archive_subtree_len(const tf_archive *ar, size_t i);

/* Whether b is the version a of a file: the same inode number and chunks
 * (b may be a move of a, or have other times or mode). */
bool tf_entry_same_version(const tf_entry *a, const tf_entry *b);

uint64_t tf_archive_nblobs(const tf_archive *ar);
/* Copies the record of blob slot idx (redirects applied) into *b. The
 * record is a copy, not a view into the archive: a catalog read by the
 * page (docs/CATALOG.md) decodes it from a page that may be evicted, or
 * fail to read. 0, or -1 with the reason (idx past the table). */
int tf_archive_blob(const tf_archive *ar, uint64_t idx, tf_blob *b, tf_error *e);
/* Index of a live blob with this id, or -1 when not found. A writer of
 * format 2 looks among the files of its last commits, its references
 * (tf_archive_use_reference) and its own (store/writer_view.h); any
 * other open among every live blob. */
int64_t tf_archive_find_blob(const tf_archive *ar, const tf_blob_id *id);
/* Writer: the file ent is a reference of the next one (its blobs may be
 * found, and its keyframes redirected). Format 2 reads what that needs
 * from the pages, or, where it cannot, the whole catalog. */
int tf_archive_use_reference(tf_archive *ar, const tf_entry *ent, tf_error *e);
/* Writer: reads the whole catalog into memory (a writer of format 2
 * reads what each file needs, otherwise), for what needs every record:
 * liveness. */
int tf_archive_load_whole(tf_archive *ar, tf_error *e);
/* Number of delta steps from blob idx down to a self-contained blob,
 * following redirects (a walk of that many steps); TF_CHAIN_MAX + 1 for
 * a chain of a paged view (format version 2, read-only) that is longer
 * or cannot be read, which a read of it then reports. */
unsigned tf_archive_chain_depth(const tf_archive *ar, uint64_t idx);
/* The longest chain of deltas that live files read (store/liveness.h)
 * that ends at blob idx (0: none uses it as a reference). The writer
 * redirects a keyframe slot only while this plus one keeps within its
 * chain bound. */
unsigned tf_archive_chain_above(const tf_archive *ar, uint64_t idx);

/* Whether slot idx may be redirected by a later commit: it is no blob's
 * model and serves no other slot. *again: an earlier commit redirected
 * it (a redirect of it again takes a segment of version 3, trajfs(5)). */
bool tf_archive_may_redirect(const tf_archive *ar, uint64_t idx, bool *again);

/* Whether blob idx serves a redirected slot: its payload is that slot's,
 * counted there. */
bool tf_archive_blob_serves_slot(const tf_archive *ar, uint64_t idx);

/* A byte range of the archive file. */
typedef struct {
    uint64_t off, len;
} tf_archive_range;
/* Sorts n ranges by offset. */
void tf_archive_ranges_sort(tf_archive_range *r, size_t n);
/* The payloads that the redirects of the last commit applied retired:
 * no committed state after it reads them, so their space may be given
 * back once it is durable (*n of them; valid until the next apply). A
 * writer's archive keeps them, a read-only one none (*n is 0). */
const tf_archive_range *tf_archive_retired(const tf_archive *ar, size_t *n);
/* The bytes of the payloads that redirects retired, in all commits. */
uint64_t tf_archive_retired_bytes(const tf_archive *ar);
/* Payloads smaller than this are too small to give back: a few blocks
 * at most, and their delta is often no smaller, so that they stay. */
#define TF_GIVE_BACK_MIN ((uint64_t)16 << 10)
/* Whether blob b is written in a run of payloads that a later commit may
 * retire and give back whole blocks of (tf_container_append_retirable),
 * as the writer retires the newest checkpoint's keyframes: a tensor
 * chunk that decodes without a reference, of TF_GIVE_BACK_MIN bytes or
 * more. A smaller one is written with the payloads that stay, after the
 * run, so that a run's blocks hold only what may be given back; if it is
 * retired, only the whole blocks inside it are given back. */
bool tf_blob_in_retirable_run(const tf_blob *b);
uint64_t tf_archive_next_ino(const tf_archive *ar);

/* Longest reference chain an archive may contain, whatever the writer's
 * keyframe setting: readers walk chains iteratively, but the bound keeps
 * a hostile archive from making one read decode forever. */
#define TF_CHAIN_MAX 4096

/* Writer: whether seg, applied next, passes every check an open makes of
 * its blobs and entries, so that a commit never makes the archive
 * unreadable. Changes nothing. */
int tf_archive_check_segment(const tf_archive *ar, const tf_segment *seg, tf_error *e);

/* Whether seg, applied next, may leave slots that live files need now
 * needed by none (store/liveness.h): it removes or replaces a file
 * (other than by a move or new attributes of the same chunks), or
 * redirects a slot served by a blob with a reference or a model. */
bool tf_archive_segment_drops(const tf_archive *ar, const tf_segment *seg);

/* Makes sure ent (an entry of this archive, or a copy of one) has its
 * body (pieces, tensors, chunks): an open with lazy_bodies reads it
 * here, once; otherwise it has it. Safe from several threads. */
int tf_archive_entry_body(const tf_archive *ar, const tf_entry *ent, tf_error *e);
/* Format version 2: calls fn with the offset and length of each
 * catalog page the last commit reaches (its root and trailer aside),
 * until fn fails; version 1: none. */
int tf_archive_pages(tf_archive *ar,
                     int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e), void *arg,
                     tf_error *e);
/* Writer: readies a commit's segment for this archive's format, before
 * it is checked: in version 2 the blobs of its redirects, which the
 * writer puts last, serve their slots only (tf_segment.nserving). */
int tf_archive_prepare(tf_archive *ar, tf_segment *seg, tf_error *e);
/* Writer: writes the commit's catalog (version 1: the segment; 2: its
 * pages and root) and its trailer, durable as mode says
 * (tf_container_commit). */
int tf_archive_write(tf_archive *ar, tf_segment *seg, tf_commit_mode mode, bool *previous_synced,
                     tf_error *e);
/* Writer: applies a freshly committed segment to the in-memory view
 * (takes ownership of its contents). A writer that holds the table
 * checks it again first; one of format 2 that reads records from the
 * pages relies on tf_archive_check_segment's check before the write
 * (its pages read as the commit left them already). */
int tf_archive_apply(tf_archive *ar, tf_segment *seg, tf_error *e);

/* What a mounted view does around each commit applied to the in-memory
 * catalog, one a reader finds (tf_archive_refresh) or one the archive's
 * writer makes (tf_write_opts.applied): begin gets the segment, checked,
 * before the catalog and blob table change (the old ones are still there
 * to look at); end comes once they have. */
typedef struct tf_archive_hooks {
    void (*begin)(void *arg, const tf_segment *seg);
    void (*end)(void *arg);
    void *arg;
} tf_archive_hooks;

/* Reader of an archive that another process appends to: applies the
 * commits made since it was opened or last refreshed. Format 1 reads
 * only the new trailers and catalog segments, each passing the checks an
 * open makes (tf_archive_check_segment, a tree of unique inode numbers)
 * before anything changes, a hook pair a commit. Format 2 reads the new
 * trailers back to the last commit applied (else the archive was
 * rewritten), then the newest root and its entries, which must form such
 * a tree: one hook pair, its segment the entries that changed. A tail
 * without a valid trailer is left for later. *changed: at least one
 * commit was applied (also when a later one then failed). A blob slot
 * keeps its bytes: blobs are only appended, and a redirect serves a
 * slot's bytes by another blob. */
int tf_archive_refresh(tf_archive *ar, const tf_archive_hooks *hooks, bool *changed, tf_error *e);

#endif
