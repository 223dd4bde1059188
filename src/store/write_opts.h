/* The settings of an archive's writer (store/writer.h), their defaults,
 * and the one parser and help text of the settings a user gives: as
 * options of `trajpack create` and `add` (--max-chain N) and as mount
 * options of trajfs (-o max_chain=N). */
#ifndef TRAJFS_STORE_WRITE_OPTS_H
#define TRAJFS_STORE_WRITE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "format/catalog.h"
#include "format/container.h"

struct tf_archive_hooks; /* store/archive.h */

#define TF_MAX_CHAIN_DEFAULT 16
/* Largest prog search budget (expansions per tensor) a writer accepts:
 * far past where programs stop improving (codec/prog/prog.h), and a bound on
 * the time one tensor's search may take. */
#define TF_PROG_BUDGET_MAX 4096
/* Most encoder threads a user may ask for. */
#define TF_WRITE_THREADS_MAX 1024

typedef struct {
    unsigned format_version; /* of an archive the writer creates
                                (format/container.h); 0: the default */
    unsigned threads;     /* encoder threads, >= 1 */
    unsigned max_chain;   /* longest delta chain before a keyframe */
    unsigned prog_budget; /* prog search expansions per tensor, at most
                             TF_PROG_BUDGET_MAX; 0: the codec's default
                             (TF_PROG_DEFAULT_BUDGET) */
    bool search;          /* the encoder of earlier releases, for final
                             archiving: a program search for every tensor
                             without a reference and every keyframe, every
                             codec tried on every chunk (pipeline.c);
                             otherwise codecs are chosen from samples */
    bool all_programs;    /* with search, a program is searched for every
                             tensor, also one with a reference
                             (pipeline.c, mark_search_spans); implies
                             search */
    /* Called on the calling thread with the number of tensor or file
     * bytes consumed since the previous call (may be NULL). */
    void (*progress)(void *arg, uint64_t bytes);
    /* Called on the calling thread when a rebase (store/rebase.h)
     * starts, with the number of chunks it re-encodes and their bytes;
     * progress is then called with the bytes of each chunk stored. NULL:
     * a rebase calls neither (an add's progress counts its file's
     * bytes alone). */
    void (*rebasing)(void *arg, uint64_t chunks, uint64_t bytes);
    void *progress_arg;
    /* Called on the writer's thread around each change of the in-memory
     * catalog (when a commit is durable), as tf_archive_refresh calls
     * them for a reader (store/archive.h), so that other threads reading
     * the archive (a mount) can hold off in between and update what they
     * derive from it (NULL: none). */
    const struct tf_archive_hooks *applied;
    /* What readers outside the catalog still read: a mount's open files,
     * some of them versions that a removal or a replacement left. Called
     * on the writer's thread when it gives space back, it calls
     * keep(keep_arg, ent) for each open version: their data is not given
     * back while they are open, and tf_writer_give_back_unread gives it
     * back once they close (NULL: none). */
    void (*open_versions)(void *arg, void (*keep)(void *keep_arg, const tf_entry *ent),
                          void *keep_arg);
    void *open_versions_arg;
    /* A commit that changes the names in a directory (adds, removes or
     * replaces one) gives that directory's entry the commit's time, as a
     * file system gives a directory's mtime (a mount's writer). */
    bool dir_times;
    /* A series of commits (trajpack add of many files): each is written
     * behind (format/container.h, TF_COMMIT_BEHIND), its payloads and
     * trailer written and synced by the container's thread while the
     * next file is encoded; the next commit, or tf_writer_settle, waits
     * for it. The space a commit retires is given back once its trailer
     * is durable, as always. A commit that drops files is synced at
     * once. */
    bool commit_behind;
    /* Bytes of reconstructed chunks the writer's reader caches (for a
     * parent that is not the file added just before); 0:
     * TF_WRITE_CACHE_DEFAULT. */
    size_t cache_bytes;
    /* The writer holds the whole catalog in memory, as one of format 1
     * does, where one of format 2 reads what each file needs from the
     * pages (store/writer_view.h): a writable mount, whose readers read
     * records while a commit writes new pages. */
    bool whole_catalog;
    /* An archive that is a URL (s3://): its settings; NULL: the
     * defaults. */
    const tf_remote_opts *remote;
} tf_write_opts;

#define TF_WRITE_CACHE_DEFAULT ((size_t)256 << 20)

/* Bytes of encoded payloads a commit holds back, to write them after the
 * run of keyframes they came with (the deltas of the keyframes those
 * supersede; the small payloads that stay get an eighth of it), counted
 * as the memory they take: an eighth of the cache, at most 32 MiB, so
 * that memory stays bounded by the cache (small caches are asked for to
 * bound it). */
size_t tf_write_opts_held_bytes(const tf_write_opts *o);

/* One encoder thread per online CPU (at most TF_WRITE_THREADS_MAX),
 * chains of TF_MAX_CHAIN_DEFAULT, the prog codec's own budget, programs
 * only where they are searched by default, no callbacks, the default
 * cache. */
void tf_write_opts_default(tf_write_opts *o);

/* Whether the writer keeps the newest checkpoint of each series as
 * keyframes, re-encoded as deltas once a newer one supersedes it
 * (store/pipeline.c, supersede_ref), so that the checkpoint loaded most
 * decodes no chain: with any chain bound but the largest, TF_CHAIN_MAX.
 * With that one the writer has no bound to keep and stores release 1's
 * layout, the smallest (cold storage): each checkpoint a forward delta
 * against the one before it, the newest too, where the reverse deltas
 * of the windows are about 0.3% larger (ULP's context, the reference's
 * exponent, predicts an older weight from a newer one less well than
 * the other way round). */
bool tf_write_opts_newest_keyframes(const tf_write_opts *o);

/* Sets the setting called name from value: "threads", "max_chain" and
 * "prog_budget" take a whole number, "search" and "all_programs" are
 * flags (value NULL; all_programs sets search too). Returns 0, or -1 with EINVAL and a message saying what value is
 * expected, or with ENOENT when name is no writer setting. Messages do
 * not repeat the name: the caller spells the setting as its users do
 * (--max-chain, -o max_chain). */
int tf_write_opts_set(tf_write_opts *o, const char *name, const char *value, tf_error *e);

/* How a help text spells the settings. */
typedef enum {
    TF_WRITE_OPTS_OPTIONS,       /* trajpack's options: "--max-chain N" */
    TF_WRITE_OPTS_MOUNT_OPTIONS, /* trajfs's: "-o max_chain=N" */
} tf_write_opts_spelling;

/* Writes the help text of the settings, a line or more each, the
 * descriptions in a column of their own: the part of trajpack create's
 * and add's --help and of trajfs's that they share. */
void tf_write_opts_help(FILE *out, tf_write_opts_spelling spelling);

#endif
