/* Messages of the mount daemon: to stderr while it runs in the
 * foreground, to syslog once it is a daemon (stderr is then /dev/null).
 * libfuse's own messages take the same way. */
#ifndef TRAJFS_FS_LOG_H
#define TRAJFS_FS_LOG_H

#include <stdbool.h>
#include <syslog.h>

/* Sends later messages to syslog (ident "trajfs") instead of stderr. */
void fs_log_use_syslog(void);

/* One line; prio is a syslog priority (LOG_ERR, LOG_WARNING, ...). */
void fs_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like fs_log with LOG_ERR, but a message already logged is not logged
 * again: a damaged tensor read by many requests is reported once.
 * Returns whether the line was written. */
bool fs_log_error_once(const char *msg);

#endif
