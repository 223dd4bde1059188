/* Leaving the terminal around a mount's setup. The process forks before
 * anything else, while it has no thread (a thread does not survive a
 * fork: a remote archive's fetchers and an s3:// writer's uploaders
 * started by the open would be gone in the daemon), and the child does
 * all the work. The parent waits for its verdict and exits with it, so
 * that a failed setup (an archive that does not open, a mount point
 * refused) says why on the terminal and in the exit status, as in the
 * foreground. */
#ifndef TRAJFS_FS_DAEMON_H
#define TRAJFS_FS_DAEMON_H

#include <stdbool.h>

typedef struct {
    int verdict; /* the child's end of the pipe to the parent; -1: none */
} fs_daemon;

/* In the foreground: nothing. Otherwise forks: returns 0 in the child,
 * which starts a session of its own; the parent never returns (it
 * exits as the child's setup ends). -1 when it cannot fork. */
int fs_daemon_start(bool foreground, fs_daemon *d);
/* The setup is done: the working directory becomes /, and in the
 * background standard input and output and error go to /dev/null and
 * the parent exits 0. */
void fs_daemon_ready(fs_daemon *d);
/* The setup failed (and said why on standard error): the parent exits 1. */
void fs_daemon_failed(fs_daemon *d);

#endif
