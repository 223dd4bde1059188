/* Following an archive that others append to (-o follow=SECONDS): a
 * thread of a read-only mount looks at the archive's size every interval
 * and applies the commits found since (tf_archive_refresh) with the
 * hooks a read-write mount applies its own with (view.h): under the view
 * lock held exclusively, the tree rebuilt, and the kernel told which
 * names and inodes changed, so that lookups, listings and attributes
 * show the new commits (an NFS server re-exporting the mount asks the
 * kernel too), while open files keep reading the version they opened:
 * read handles hold copies of their entries, and blobs are never
 * removed.
 *
 * The archive's file is what is followed: one that `trajpack gc`
 * replaced is not reopened (its blobs are numbered anew); that is
 * logged, and the mount goes on serving the file it opened. */
#ifndef TRAJFS_FS_FOLLOW_H
#define TRAJFS_FS_FOLLOW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "store/archive.h"

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping, running;
    tf_archive *ar;
    const tf_archive_hooks *applied; /* around each commit applied */
    struct timespec interval;
    const char *archive;        /* absolute path, to notice a replacement */
    const struct stat *opened;  /* the archive file as opened */
    bool told_replaced;
    bool trace;                 /* TRAJFS_FOLLOW_TRACE: each look told on stderr */
    unsigned long looks;
} fs_follow;

/* Starts the thread, looking every `seconds` (> 0) at the archive ar,
 * which lies at path archive (absolute) and was opened as the file
 * *opened (all kept by the caller while the thread runs). */
int fs_follow_start(fs_follow *f, tf_archive *ar, const tf_archive_hooks *applied,
                    const char *archive, const struct stat *opened, double seconds);
/* Ends the thread (a commit being applied is finished first). */
void fs_follow_stop(fs_follow *f);

#endif
