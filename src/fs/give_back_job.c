#include "fs/give_back_job.h"

#include <stdlib.h>
#include <syslog.h>

#include "fs/log.h"
#include "store/writer.h"

void fs_open_versions(void *fs, void (*keep)(void *keep_arg, const tf_entry *ent), void *keep_arg)
{
    fs_handles_each_version(&((fs_state *)fs)->handles, keep, keep_arg);
}

static void run_give_back(fs_job *job, void *ctx)
{
    fs_state *fs = ctx;
    free(job);
    tf_error e;
    /* Several closes queue several jobs: the first gives back. */
    if (tf_writer_give_back_owed(fs->writer) && tf_writer_give_back_unread(fs->writer, &e) < 0)
        fs_log_error_once(e.msg);
}

void fs_queue_give_back(fs_state *fs)
{
    if (!tf_writer_give_back_owed(fs->writer))
        return;
    fs_job *job = calloc(1, sizeof *job);
    if (!job)
        return;
    job->run = run_give_back;
    fs_committer_push(&fs->committer, job);
}
