/* Thinning a run: which files of an archive's checkpoints a prune
 * removes, by rules on the checkpoints of each run, and what that frees.
 * Nothing here writes: the removal is tf_writer_remove_paths.
 *
 * The checkpoints are those the reference index sees (store/ckpt_path.h):
 * the regular files with a checkpoint component, grouped by run key and
 * by step, the checkpoints of a run in tf_natcmp order of their steps. So
 * step-N.safetensors and step-N.optim.safetensors are two runs, and so
 * are run1/checkpoint-N and run2/checkpoint-N: each is pruned on its own.
 * Files without a step (config.json) are never touched.
 *
 * A directory holding a step number may hold files or directories with
 * other step numbers below it: numbered files inside a checkpoint
 * (checkpoint-500/rng_state_0.pth), or the checkpoints of a numbered run
 * (run2/step-400.safetensors beside run2/config.json). A prune must not
 * take one for the other, so:
 *   - what lies below a checkpoint directory and carries its step number
 *     (checkpoint-500/global_step500/) belongs to it;
 *   - a checkpoint directory whose own files (those whose checkpoint
 *     component it is) hold at least as many bytes as the files below it
 *     with other step numbers is one checkpoint with all of them;
 *   - otherwise it is a run's directory: its own files are not
 *     checkpoint files and are never touched, and the others are
 *     checkpoints of their own runs. */
#ifndef TRAJFS_STORE_PRUNE_H
#define TRAJFS_STORE_PRUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "store/archive.h"

/* The longest --keep or --drop pattern, in bytes. */
#define TF_PRUNE_PATTERN_MAX 4096

typedef struct {
    /* A checkpoint is kept whole if it is among the last keep_last of its
     * run (0: no such rule), or its step number (tf_ckpt_step_number) is
     * a multiple of keep_every (0: no such rule), or one of its files
     * matches a keep pattern (tf_prune_match). */
    unsigned keep_last;
    unsigned keep_every;
    const char *const *keep;
    size_t nkeep;
    /* Of the other checkpoints, only the files that match a drop pattern
     * go; with no drop pattern, all of their files. */
    const char *const *drop;
    size_t ndrop;
} tf_prune_rules;

/* Whether a file at archive path `path` matches a --keep or --drop
 * pattern: a glob (fnmatch(3), '*' also matching '/') that matches the
 * path or a tail of it after a '/' (its base name, checkpoint-500/...),
 * or a leading part of either that ends at a '/' (a directory: everything
 * below it). */
bool tf_prune_match(const char *pattern, const char *path);

typedef struct {
    size_t nentries;
    bool *dropped;        /* per entry (archive order): it goes; a
                             directory goes when it is left with no file */
    uint64_t files, dirs; /* regular files and directories that go */
    uint64_t runs, checkpoints; /* what the rules looked at */
    uint64_t whole, partly;     /* checkpoints that go whole, that lose some
                                   of their files */
    uint64_t *keep_matches;     /* per keep pattern: checkpoint files it
                                   matched */
    uint64_t emptied_runs;      /* runs that would lose every file of every
                                   checkpoint */
    char *emptied_run;          /* the first of them (its run key), or NULL */
} tf_prune_plan;

/* Applies the rules to the archive's live entries (at least one rule:
 * EINVAL otherwise). 0, or -1 (ENOMEM); free the plan with
 * tf_prune_plan_free either way. */
int tf_prune_plan_make(const tf_archive *ar, const tf_prune_rules *rules, tf_prune_plan *plan,
                       tf_error *e);
void tf_prune_plan_free(tf_prune_plan *plan);

/* What removing the entries dropped[] (per entry, archive order) frees
 * (store/liveness.h): */
typedef struct {
    uint64_t now;         /* payload bytes needed now and by no kept file:
                             given back by the removal's commit */
    uint64_t later;       /* payload bytes of chunks that only removed
                             files had but kept chunks still decode
                             through, and of those kept chunks: given back
                             once these are re-encoded, less what their
                             new encodings take */
    uint64_t rebase_chunks; /* the kept chunks to re-encode */
} tf_prune_frees;

int tf_prune_frees_of(const tf_archive *ar, const bool *dropped, tf_prune_frees *out,
                      tf_error *e);

#endif
