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
 * logged, and the mount goes on serving the file it opened.
 *
 * A read may also ask for a look at once (fs_follow_look_now): one that
 * met a payload a newer commit retired (a superseded newest: the writer
 * gives its space back once that commit is durable) reads right once
 * the commit is applied. The thread makes that look too, so that every
 * refresh, and every notice to the kernel, comes from it: a request
 * handler that told the kernel to drop the pages of the file it is
 * reading would wait on itself. */
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
    pthread_cond_t wake;   /* the thread: stop, or look now */
    pthread_cond_t looked; /* those who asked for a look: one ended */
    bool stopping, running;
    bool asked;                   /* a read asked for a look now */
    unsigned long begun, ended;   /* looks begun, the last one ended */
    uint64_t looks_applied;       /* looks that applied commits */
    tf_archive *ar;
    const tf_archive_hooks *applied; /* around each commit applied */
    struct timespec interval;
    const char *archive;        /* absolute path, to notice a replacement */
    const struct stat *opened;  /* the archive file as opened */
    bool told_replaced;
    bool trace;                 /* TRAJFS_FOLLOW_TRACE: each look told on stderr */
} fs_follow;

/* How long a read waits for the look it asked for, at most: the look
 * of a local archive takes milliseconds, a remote one's a few requests.
 * (Should the look need the kernel to drop pages the waiting read is
 * filling, the read gives up after this and the look goes on.) */
#define FS_FOLLOW_ASK_WAIT_S 10

/* Starts the thread, looking every `seconds` (> 0) at the archive ar,
 * which lies at path archive (absolute) and was opened as the file
 * *opened (all kept by the caller while the thread runs). */
int fs_follow_start(fs_follow *f, tf_archive *ar, const tf_archive_hooks *applied,
                    const char *archive, const struct stat *opened, double seconds);
/* Ends the thread (a commit being applied is finished first). */
void fs_follow_stop(fs_follow *f);

/* How many looks applied commits so far (0 when the thread does not
 * run): what a read notes before it begins. */
uint64_t fs_follow_applied(fs_follow *f);
/* Asks the thread for a look now and waits until one that began after
 * the call has ended (FS_FOLLOW_ASK_WAIT_S at most); returns whether
 * commits were applied since fs_follow_applied said `applied`. */
bool fs_follow_look_now(fs_follow *f, uint64_t applied);

#endif
