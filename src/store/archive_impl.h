/* The archive's in-memory state, for the files that make it: archive.c
 * (the catalog as segments apply to it, and the queries),
 * archive_paged.c (format version 2: the catalog read from and written
 * to pages) and writer_view.c (what a writer of format 2 asks of the
 * records, where it holds no table). Nothing else includes this. */
#ifndef TRAJFS_STORE_ARCHIVE_IMPL_H
#define TRAJFS_STORE_ARCHIVE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/id_index.h"
#include "format/paged.h"
#include "store/archive.h"
#include "store/blob_table.h"
#include "store/writer_view.h"

/* What a blob slot is to others (flags, per blob). A slot that serves a
 * model or another slot is never redirected: its payload must stay what
 * its users decode, and a retired payload is always the slot's own, used
 * by no other. A slot redirected already is redirected again only by a
 * segment of version 3 (a rebase). */
enum {
    SLOT_MODEL = 1,      /* some blob names it as its model */
    SLOT_TARGET = 2,     /* it serves a redirected slot */
    SLOT_REDIRECTED = 4, /* it is served by a later blob */
};

/* What only writers ask of the blob table, built at their first
 * question rather than at open (on a long run the id index was 40% of
 * the time of an open that only lists, and 24 bytes or more a blob): the
 * content id index (id -> the first live blob of that id), and the
 * longest chains ending at each slot that live files read (the table's
 * `above` counts every delta ever applied, as an open's checks must).
 * Once built, every apply keeps both up to date, but one that may leave
 * slots dead, after which the next question builds them again. The lock
 * guards the build; questions after it need none (the archive does not
 * change while they run). */
typedef struct {
    pthread_mutex_t lock;
    atomic_bool built;
    tf_id_index map; /* into the blob table */
    uint16_t *live_above; /* per slot, as `above`, over live slots */
    uint64_t live_cap;
} id_index;

struct tf_archive {
    tf_container c;
    tf_paged *paged; /* format version 2; NULL for version 1 */
    bool table;      /* the blob table, above and flags hold every slot:
                        version 1, a full check's view of version 2, or
                        a writer's once it needed them all
                        (archive_need_table); otherwise records are read
                        from the pages when asked for */
    writer_view *view; /* a writer of version 2 without the table */
    bool read_failed;  /* a check of a writer without the table could not
                          read a record: read_error says why */
    tf_error read_error;
    uint64_t *written_retired; /* (offset, length) of the payloads the
                                  redirects of the commit written last
                                  retired, one pair a redirect */
    uint64_t commits;
    tf_blob_table blobs; /* per slot, the blob that serves it (redirects applied) */
    uint16_t *above; /* per slot, the longest chain of deltas ending at it */
    uint8_t *flags;  /* per slot, SLOT_* */
    uint64_t nblobs;
    id_index *ids; /* NULL in a scratch index of entries */
    tf_archive_range *retired; /* payloads the last commit's redirects retired
                                  (a writer's) */
    size_t nretired, retired_cap;
    uint64_t retired_bytes; /* those of every commit, in all */
    tf_entry *entries; /* live entries in path order */
    size_t nentries, entries_cap;
    uint64_t next_ino;
    bool borrowed; /* a scratch index of entries it does not own */
    pthread_mutex_t body_lock; /* owned by tf_archive_entry_body: a pending
                                  body is read once */
};

/* archive.c's, for archive_paged.c and writer_view.c. */
/* The longest chain of deltas ending at slot idx, over every slot: the
 * table's count, or the one a writer's view computed. */
unsigned archive_chain_count(const tf_archive *ar, uint64_t idx);
int archive_resize_blobs(tf_archive *ar, uint64_t cap, tf_error *e);
void archive_raise_above(const tf_archive *ar, uint16_t *counts, uint64_t idx, unsigned above);
/* Checks slot idx of the table as an open checks a new blob. */
int archive_check_slot(const tf_archive *ar, uint64_t idx, tf_error *e);
int archive_check_entry(const tf_archive *ar, const tf_segment *seg, const tf_entry *ent,
                        tf_error *e);
int archive_check_tree(const tf_archive *ar, tf_error *e);
int archive_put_entry(tf_archive *ar, tf_entry *ent, tf_error *e);
/* The next inode number once seg's entries are in. */
uint64_t archive_next_ino_after(const tf_archive *ar, const tf_segment *seg);
int archive_scratch_after(const tf_archive *ar, const tf_segment *seg, tf_archive *scratch,
                          tf_error *e);

/* archive_paged.c's. */
/* cache_bytes: tf_open_opts.catalog_cache. */
int archive_paged_open(tf_archive *ar, bool check_all, bool lazy_bodies, size_t cache_bytes,
                       tf_error *e);
int archive_paged_blob(const tf_archive *ar, uint64_t idx, tf_blob *b, tf_error *e);
/* Every record into the blob table, its flags and chain counts, every
 * record and entry checked as an open of version 1 checks them; the
 * table then answers (ar->table). */
int archive_paged_load_table(tf_archive *ar, tf_error *e);
int archive_paged_prepare(tf_archive *ar, tf_segment *seg, tf_error *e);
int archive_paged_commit(tf_archive *ar, tf_segment *seg, tf_commit_mode mode,
                         bool *previous_synced, tf_error *e);
void archive_paged_applied(tf_archive *ar, const tf_segment *seg);
/* Applies the commits up to top, the newest trailer (at its offset at),
 * that a poll found. */
int archive_paged_refresh(tf_archive *ar, const tf_trailer *top, uint64_t at,
                          const tf_archive_hooks *hooks, bool *changed, tf_error *e);
/* A writer without the table loads it (and its chain counts and flags),
 * and from then on answers as a writer of version 1 does: for what
 * needs every record (liveness), or records of an earlier writer. */
int archive_need_table(tf_archive *ar, tf_error *e);

#endif
