/* Following an archive that others append to (-o follow=SECONDS): a
 * thread of a read-only mount looks at the archive's size every interval
 * and applies the commits found since (tf_archive_refresh) as a
 * read-write mount applies its own (fs.h): under the view lock held
 * exclusively, the tree rebuilt. It then tells the kernel which names
 * and inodes changed, so that lookups, listings and attributes show the
 * new commits (an NFS server re-exporting the mount asks the kernel
 * too), while open files keep reading the version they opened: read
 * handles hold copies of their entries, and blobs are never removed.
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
#include <time.h>

struct fs_state;

/* A name or inode of which the kernel may hold an old version. */
typedef struct {
    uint64_t parent; /* directory inode of `name`; 0: the kernel cannot know it */
    char *name;
    uint64_t old_ino; /* what `name` was before the commit; 0: nothing */
} fs_follow_note;

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping, running;
    struct fs_state *fs;
    struct timespec interval;
    const char *archive;   /* absolute path, to notice a replacement */
    bool told_replaced;
    fs_follow_note *notes; /* of the commit being applied */
    size_t nnotes, notes_cap;
    bool trace;            /* TRAJFS_FOLLOW_TRACE: each look told on stderr */
    unsigned long looks;
} fs_follow;

/* Starts the thread, looking every `seconds` (> 0) at the archive of
 * fs, which lies at path archive (absolute, and kept by the caller while
 * the thread runs). */
int fs_follow_start(fs_follow *f, struct fs_state *fs, const char *archive, double seconds);
/* Ends the thread (a commit being applied is finished first). */
void fs_follow_stop(fs_follow *f);

#endif
