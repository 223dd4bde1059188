#include "fs/commit_jobs.h"

#include <errno.h>
#include <stdlib.h>

#include "fs/change_errno.h"
#include "fs/log.h"
#include "fs/stream.h"
#include "fs/view.h"

typedef enum { COMMIT, RELEASE, STREAM } commit_kind;

typedef struct {
    fs_job job; /* first: the committer's */
    commit_kind kind;
    fuse_req_t req; /* COMMIT */
    uint64_t ino, fh; /* COMMIT, STREAM */
    fs_handle *h;     /* RELEASE: out of the table already */
    uint64_t serial; /* STREAM: the handle's */
} commit_job;

/* A checkpoint that found references for little of its bytes, where its
 * run has checkpoints, goes to the log. */
static void warn_unmatched(fs_state *fs, const char *path)
{
    const tf_add_report *r = tf_writer_last_report(fs->writer);
    if (!tf_add_report_unmatched(r))
        return;
    char why[256];
    tf_add_report_warning(r, why, sizeof why);
    fs_log(LOG_WARNING, "%s: %s", path, why);
}

/* Where the file `name` in directory a->parent is committed: its archive
 * path and attributes. *took_over: the inode of the regular file it
 * replaces, 0 for none. */
static int place(fs_state *fs, const fs_write_attrs *a, const char *name,
                 char path[TF_PATH_MAX + 1], tf_entry_attrs *ea, uint64_t *took_over)
{
    const fs_node *dir;
    int err = fs_tree_resolve(&fs->tree, a->parent, name, &dir, path);
    if (err) {
        fs_log(LOG_ERR, "%s: not committed: its directory is gone", name);
        return err;
    }
    const fs_node *old = fs_tree_child(&fs->tree, dir, name);
    *ea = (tf_entry_attrs){ .ino = a->ino, .mode = a->mode, .mtime = a->mtime };
    if (old && fs_node_is_dir(old))
        return EISDIR;
    if (old && old->ent->kind != TF_ENTRY_SYMLINK)
        ea->ino = *took_over = old->ino;
    else if (fs_tree_by_ino(&fs->tree, ea->ino))
        ea->ino = tf_writer_new_ino(fs->writer); /* never two entries with one inode */
    return 0;
}

/* Commits the spool as the file `name` in directory a->parent; *took_over
 * as place's. */
static int commit_spool(fs_state *fs, int spool, const fs_write_attrs *a, const char *name,
                        uint64_t *took_over)
{
    char path[TF_PATH_MAX + 1];
    tf_entry_attrs ea;
    int err = place(fs, a, name, path, &ea, took_over);
    if (err)
        return err;
    tf_error e;
    if (tf_writer_add_fd(fs->writer, spool, path, NULL, &ea, &e) < 0) {
        fs_log(e.errnum == EINVAL ? LOG_WARNING : LOG_ERR, "%s: not committed: %s", path, e.msg);
        *took_over = 0;
        return fs_change_errno(&e);
    }
    warn_unmatched(fs, path);
    return 0;
}

/* Commits h's changes, if it has any (with unreported, not when its last
 * failure was reported already). Returns 0 or an errno value. */
static int commit_handle(fs_state *fs, fs_handle *h, bool unreported)
{
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    uint64_t took_over = 0;
    int err = 0;
    fs_stream_state_end(&h->stream); /* a stream job still to come has nothing to do */
    fs_handle_hold(h); /* no write changes the spool meanwhile */
    if (fs_handles_pending_commit(&fs->handles, h, unreported, &a, name)) {
        err = commit_spool(fs, h->spool, &a, name, &took_over);
        fs_handles_committed(&fs->handles, h, err == 0);
    }
    fs_handle_unhold(h);
    /* Once the spool is released: dropping the pages waits for writes in
     * progress, which wait for the spool. */
    if (took_over)
        fs_invalidate_inode(fs, took_over);
    return err;
}

/* Encodes h's file as it is written; when that gives up (or fails), the
 * file's close commits it. */
static void run_stream(fs_state *fs, const commit_job *j)
{
    fs_handle *h = fs_handles_get(&fs->handles, j->fh, j->ino);
    if (!h || h->serial != j->serial)
        return; /* closed already */
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    char path[TF_PATH_MAX + 1];
    tf_entry_attrs ea;
    uint64_t took_over = 0;
    tf_error e;
    if (fs_handles_pending_commit(&fs->handles, h, false, &a, name) &&
        place(fs, &a, name, path, &ea, &took_over) == 0 &&
        fs_stream_commit(fs, h, path, &ea, &e) == 0) {
        warn_unmatched(fs, path);
        if (took_over)
            fs_invalidate_inode(fs, took_over);
    }
    fs_stream_state_end(&h->stream);
}

static void run(fs_job *job, void *ctx)
{
    fs_state *fs = ctx;
    commit_job *j = (commit_job *)job;
    fs_handle *h;
    switch (j->kind) {
    case COMMIT:
        h = fs_handles_get(&fs->handles, j->fh, j->ino);
        fuse_reply_err(j->req, h ? commit_handle(fs, h, false) : EBADF);
        break;
    case RELEASE:
        commit_handle(fs, j->h, true); /* failures are logged */
        fs_handle_free(j->h);
        break;
    case STREAM:
        run_stream(fs, j);
        break;
    }
    free(j);
}

static commit_job *new_job(commit_kind kind, uint64_t ino, uint64_t fh)
{
    commit_job *j = calloc(1, sizeof *j);
    if (j)
        *j = (commit_job){ .job = { .run = run }, .kind = kind, .ino = ino, .fh = fh };
    return j;
}

void fs_queue_commit(fs_state *fs, fuse_req_t req, uint64_t ino, uint64_t fh)
{
    commit_job *j = new_job(COMMIT, ino, fh);
    if (!j) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    j->req = req;
    fs_committer_push(&fs->committer, &j->job);
}

void fs_queue_release(fs_state *fs, fs_handle *h)
{
    commit_job *j = new_job(RELEASE, h->ino, 0);
    if (!j) {
        fs_log(LOG_ERR, "out of memory: changes to inode %llu that were not committed are lost",
               (unsigned long long)h->ino);
        fs_handle_free(h);
        return;
    }
    j->h = h;
    fs_committer_push(&fs->committer, &j->job);
}

void fs_queue_stream(fs_state *fs, uint64_t ino, uint64_t fh, uint64_t serial)
{
    commit_job *j = new_job(STREAM, ino, fh);
    if (!j)
        return; /* the file is encoded at its close */
    j->serial = serial;
    fs_committer_push(&fs->committer, &j->job);
}
