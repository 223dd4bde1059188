/* One removal commit for trajpack rm and prune. */
#include "cli/remove.h"

#include <stdio.h>

#include "cli/cli.h"
#include "cli/progress.h"

int cli_removal_open(cli_removal *r, const char *archive, bool quiet)
{
    *r = (cli_removal){ .archive = archive, .rebase = { .label = "rebase", .quiet = quiet } };
    tf_write_opts opts;
    tf_write_opts_default(&opts);
    cli_rebase_bar_hook(&r->rebase, &opts);
    tf_error e;
    tf_remote_opts remote;
    opts.remote = &remote;
    int rc = cli_remote_opts(archive, &remote, &e) < 0 ? -1 : tf_writer_open(archive, false, 0, &opts, &r->w, &e);
    tf_remote_opts_free(&remote); /* read at the open only */
    if (rc < 0) {
        cli_file_error(archive, e.msg);
        r->w = NULL;
        return -1;
    }
    r->known = cli_archive_allocated(tf_writer_archive(r->w), &r->before);
    return 0;
}

void cli_removal_close(cli_removal *r)
{
    tf_writer_close(r->w);
    r->w = NULL;
}

int cli_removal_commit(cli_removal *r, const char *const *paths, size_t n)
{
    tf_error e;
    int rc = tf_writer_remove_paths(r->w, paths, n, &e);
    cli_rebase_bar_end(&r->rebase);
    if (rc < 0)
        cli_file_error(r->archive, e.msg);
    else if (tf_writer_last_report(r->w)->give_back.errnum)
        cli_error("warning: %s: %s; the space of the removed files stays in use until "
                  "`trajpack gc`", r->archive, tf_writer_last_report(r->w)->give_back.msg);
    r->known = r->known && cli_archive_allocated(tf_writer_archive(r->w), &r->after);
    cli_removal_close(r);
    return rc;
}

void cli_removal_allocated(const cli_removal *r, char *out, size_t n)
{
    if (!r->known) {
        snprintf(out, n, "allocated bytes unknown");
        return;
    }
    char before[CLI_SIZE_LEN], after[CLI_SIZE_LEN];
    cli_format_size(r->before, before);
    cli_format_size(r->after, after);
    snprintf(out, n, "allocated %s -> %s", before, after);
}
