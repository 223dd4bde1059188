/* A one-line progress bar on stderr: bytes done and total, rate and time
 * left. It is drawn only when stderr is a terminal and the user did not
 * ask for quiet, at most about ten times a second, and erased at the end
 * so that nothing of it stays in the terminal or reaches a log. */
#ifndef TRAJFS_CLI_PROGRESS_H
#define TRAJFS_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/write_opts.h"

typedef struct cli_progress cli_progress;

/* Starts a bar labelled label for total bytes. Returns NULL when no bar is
 * to be drawn; every function below accepts NULL and then does nothing. */
cli_progress *cli_progress_start(const char *label, uint64_t total, bool quiet);
/* Counts bytes more as done. Safe to call from several threads. */
void cli_progress_add(cli_progress *p, uint64_t bytes);
/* Erases the bar and frees it. */
void cli_progress_end(cli_progress *p);
/* Erases the bar of the running progress (if any) so that a message can
 * be printed on stderr; the next update draws it again. */
void cli_progress_hide(void);

/* A bar for the rebase a removal or gc makes (store/rebase.h), started
 * when it knows what it re-encodes: cli_rebase_bar_hook sets the write
 * options' rebasing and progress hooks to draw it, cli_rebase_bar_end
 * erases it. */
typedef struct {
    const char *label;
    bool quiet;
    cli_progress *bar;
} cli_rebase_bar;

void cli_rebase_bar_hook(cli_rebase_bar *b, tf_write_opts *o);
void cli_rebase_bar_end(cli_rebase_bar *b);

#endif
