#include "fs/readahead.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "fs/log.h"

#define FUSE_SUPER_MAGIC 0x65735546

static void *set_window(void *arg)
{
    fs_readahead *ra = arg;
    struct stat st;
    struct statfs sf;
    if (stat(ra->mountpoint, &st) < 0 || statfs(ra->mountpoint, &sf) < 0) {
        fs_log(LOG_WARNING, "read-ahead not set: %s: %s", ra->mountpoint, strerror(errno));
        return NULL;
    }
    if (sf.f_type != FUSE_SUPER_MAGIC)
        return NULL; /* unmounted already: not ours to tune */
    char path[64];
    snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
             minor(st.st_dev));
    FILE *f = fopen(path, "w");
    bool ok = f && fprintf(f, "%zu\n", ra->bytes >> 10) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fs_log(LOG_WARNING, "read-ahead not set: %s: %s", path, strerror(errno));
    return NULL;
}

void fs_readahead_start(fs_readahead *ra, const char *mountpoint, size_t bytes)
{
    *ra = (fs_readahead){ .bytes = bytes };
    if (!bytes)
        return;
    ra->mountpoint = strdup(mountpoint);
    if (!ra->mountpoint || pthread_create(&ra->thread, NULL, set_window, ra) != 0) {
        fs_log(LOG_WARNING, "read-ahead not set: out of memory");
        free(ra->mountpoint);
        ra->mountpoint = NULL;
        return;
    }
    ra->started = true;
}

void fs_readahead_join(fs_readahead *ra)
{
    if (ra->started)
        pthread_join(ra->thread, NULL);
    free(ra->mountpoint);
    ra->mountpoint = NULL;
    ra->started = false;
}
