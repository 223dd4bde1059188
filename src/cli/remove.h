/* What trajpack rm and prune share: one removal commit through the
 * archive's writer, and the allocated bytes of the archive before and
 * after it. */
#ifndef TRAJFS_CLI_REMOVE_H
#define TRAJFS_CLI_REMOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/progress.h"
#include "store/writer.h"

/* The archive being removed from: its writer, and the bytes its file
 * held before (st_blocks * 512; known false when stat could not say). */
typedef struct {
    const char *archive;
    tf_writer *w;
    uint64_t before, after;
    bool known;
    cli_rebase_bar rebase; /* the writer's hooks point here: r stays put */
} cli_removal;

/* Opens archive's writer and notes its allocated bytes; prints why not.
 * Unless quiet, a bar shows the rebase of the removal (on a terminal).
 * 0 or -1. */
int cli_removal_open(cli_removal *r, const char *archive, bool quiet);
/* Removes paths[0..n) in one commit (tf_writer_remove_paths), notes the
 * allocated bytes after and closes the writer. Prints why not, and a
 * warning when space could not be given back. 0 or -1. */
int cli_removal_commit(cli_removal *r, const char *const *paths, size_t n);
/* Closes the writer without a commit. */
void cli_removal_close(cli_removal *r);
/* "allocated 5.1 MB -> 3.2 MB" (or "allocated bytes unknown") into out. */
void cli_removal_allocated(const cli_removal *r, char *out, size_t n);

#endif
