/* trajfs ARCHIVE MOUNTPOINT [-o OPTIONS] [-f] [-d]: mounts a trajfs
 * archive as a directory with FUSE, read-only or (-o rw) writable. Under
 * the name mount.trajfs it takes mount(8)'s arguments instead. See
 * trajfs(1). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/malloc_tune.h"
#include "fs/daemon.h"
#include "fs/fs.h"
#include "fs/fuse_api.h"
#include "fs/log.h"
#include "fs/mount_helper.h"
#include "fs/ops.h"
#include "fs/options.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: trajfs ARCHIVE MOUNTPOINT [-o OPTIONS] [-f] [-d]\n"
                "Mount a trajfs archive as a directory of its files (read-only unless\n"
                "-o rw).\n\n");
}

enum { KEY_ALLOW_OTHER };

static const struct fuse_opt allow_other_opt[] = {
    FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
    FUSE_OPT_END,
};

/* Notes -o allow_other and keeps every argument for libfuse. */
static int note_allow_other(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)arg;
    (void)outargs;
    if (key == KEY_ALLOW_OTHER)
        *(bool *)data = true;
    return 1;
}

/* The absolute path of a file that may not exist yet (a read-write
 * mount creates its archive once the options are accepted); NULL when
 * its directory cannot be resolved. */
static char *absolute_path(const char *path)
{
    char *abs = realpath(path, NULL);
    if (abs || errno != ENOENT)
        return abs;
    char *copy = strdup(path), *dir_copy = strdup(path);
    char *dir = dir_copy ? realpath(dirname(dir_copy), NULL) : NULL;
    if (copy && dir && asprintf(&abs, "%s/%s", strcmp(dir, "/") ? dir : "", basename(copy)) < 0)
        abs = NULL;
    free(dir);
    free(dir_copy);
    free(copy);
    return abs;
}

/* Adds the options every trajfs mount has: ro unless rw, and the archive
 * as the source and "fuse.trajfs" as the type that mount tables show.
 * With allow_other it adds default_permissions: trajfs checks no
 * permissions itself, so without the kernel's checks every user of a
 * shared mount could read every file, whatever its mode. */
static int add_mount_options(struct fuse_args *args, const char *archive, bool rw)
{
    bool allow_other = false;
    if (fuse_opt_parse(args, &allow_other, allow_other_opt, note_allow_other) < 0)
        return -1;
    /* A URL is shown without its query: a presigned URL's is a secret. */
    char *abs = tf_io_is_url(archive) ? tf_io_shown_name(archive) : absolute_path(archive);
    char *escaped = NULL, *opts = NULL;
    int rc = fuse_opt_add_opt_escaped(&escaped, abs ? abs : archive);
    free(abs);
    if (rc == 0 && asprintf(&opts, "%ssubtype=trajfs,fsname=%s%s", rw ? "" : "ro,", escaped,
                            allow_other ? ",default_permissions" : "") < 0)
        opts = NULL;
    free(escaped);
    if (!opts)
        return -1;
    rc = fuse_opt_add_arg(args, "-o") < 0 || fuse_opt_add_arg(args, opts) < 0 ? -1 : 0;
    free(opts);
    return rc;
}

static void log_counts(const fs_state *fs, const char *archive)
{
    tf_reader_counts c = tf_reader_get_counts(fs->reader);
    char *shown = tf_io_display_name(archive);
    fs_log(LOG_INFO, "%s: unmounted; %llu blobs decoded, %llu cache hits",
           shown ? shown : "the archive", (unsigned long long)c.decoded, (unsigned long long)c.hits);
    free(shown);
}

/* Mounts and serves until unmounted or signalled (the shape of libfuse's
 * low-level examples). */
static int serve(fs_state *fs, struct fuse_args *args, const struct fuse_cmdline_opts *cmd,
                 const fs_options *o)
{
    fs_daemon d;
    if (fs_daemon_start(cmd->foreground, &d) < 0)
        return 1;
    /* The session checks libfuse's options: an unknown one fails it
     * before the archive is opened, or created. */
    struct fuse_session *se = fuse_session_new(args, &fs_ops, sizeof fs_ops, fs);
    if (!se) {
        fs_daemon_failed(&d);
        return 1;
    }
    int rc = 1;
    tf_error e = { 0 };
    if (fs_state_open(fs, o, &e) < 0) {
        fprintf(stderr, "trajfs: %s\n", e.msg);
        goto destroy;
    }
    if (fuse_set_signal_handlers(se) != 0)
        goto close;
    if (fuse_session_mount(se, cmd->mountpoint) != 0)
        goto handlers;
    fs_daemon_ready(&d);
    if (!cmd->foreground)
        fs_log_use_syslog();
    fs_readahead_prepare(&fs->readahead, cmd->mountpoint, o->readahead);
    if (fs_state_serving(fs, se, &e) < 0) {
        fs_log(LOG_ERR, "%s", e.msg);
        goto unmount;
    }
    if (cmd->singlethread) {
        rc = fuse_session_loop(se);
    } else {
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        if (!cfg)
            goto unmount;
        fuse_loop_cfg_set_clone_fd(cfg, (unsigned)cmd->clone_fd);
        if (cmd->max_idle_threads != UINT_MAX) /* UINT_MAX: not given */
            fuse_loop_cfg_set_idle_threads(cfg, cmd->max_idle_threads);
        fuse_loop_cfg_set_max_threads(cfg, o->threads ? o->threads : cmd->max_threads);
        rc = fuse_session_loop_mt(se, cfg);
        fuse_loop_cfg_destroy(cfg);
    }
    /* The loop returns the number of the signal that ended it (a clean
     * unmount), or a negative errno. */
    rc = rc < 0 ? 1 : 0;
unmount:
    /* Changes still queued finish while a signal's mount still stands. */
    fs_state_quiesce(fs);
    fuse_session_unmount(se);
handlers:
    fuse_remove_signal_handlers(se);
close:
    if (rc == 0)
        log_counts(fs, o->archive);
    fs_state_close(fs);
destroy:
    fuse_session_destroy(se);
    fs_daemon_failed(&d); /* (nothing once it was ready) */
    return rc;
}

static int run(struct fuse_args *args)
{
    fs_options o;
    struct fuse_cmdline_opts cmd = { 0 };
    fs_state fs;
    int rc = 1;
    if (fs_options_parse(args, &o) < 0 || fuse_parse_cmdline(args, &cmd) != 0)
        goto out;
    /* Decoding and encoding reuse freed blocks from the heap; the
     * cache's chunks are mapped on their own, so the daemon's memory
     * follows the cache bound (tf_malloc_reuse). Mapping every large
     * block afresh, as a read-only mount once did, made a cold read of
     * the benchmark trajectory 25% slower, and commits 40% slower. */
    tf_malloc_reuse();
    tf_malloc_one_heap();
    if (cmd.show_help) {
        usage(stdout);
        fs_options_help();
        printf("\nlibfuse options:\n");
        fuse_cmdline_help();
        fuse_lowlevel_help();
        rc = 0;
        goto out;
    }
    if (cmd.show_version) {
        printf("trajfs %s\n", PACKAGE_VERSION);
        fflush(stdout);
        fuse_lowlevel_version();
        rc = 0;
        goto out;
    }
    if (!o.archive || !cmd.mountpoint) {
        usage(stderr);
        fprintf(stderr, "Try 'trajfs --help' for the options.\n");
        goto out;
    }
    if (add_mount_options(args, o.archive, o.rw) < 0)
        fprintf(stderr, "trajfs: out of memory\n");
    else
        rc = serve(&fs, args, &cmd, &o);
out:
    free(cmd.mountpoint);
    fs_options_free(&o);
    return rc;
}

int main(int argc, char **argv)
{
    tf_malloc_huge_pages(argv);
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    if (fs_is_mount_helper(argv[0])) {
        args = (struct fuse_args)FUSE_ARGS_INIT(0, NULL);
        int rc = fs_mount_helper_args(argc, argv, &args);
        if (rc != 0) {
            fuse_opt_free_args(&args);
            return rc < 0 ? 1 : 0;
        }
    }
    int rc = run(&args);
    fuse_opt_free_args(&args);
    return rc;
}
