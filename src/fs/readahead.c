#include "fs/readahead.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/log.h"

/* Undoes mountinfo's escapes (\040 for a space, \011, \012, \134) in
 * place. */
static void unescape(char *s)
{
    char *to = s;
    for (const char *p = s; *p; to++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *to = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
            p += 4;
        } else {
            *to = *p++;
        }
    }
    *to = '\0';
}

/* Whether a mountinfo line ("ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS
 * [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS") is a FUSE mount at
 * mountpoint; its device if so. */
static bool fuse_mount_at(char *line, const char *mountpoint, unsigned *major, unsigned *minor)
{
    int at = 0;
    if (sscanf(line, "%*u %*u %u:%u %*s %n", major, minor, &at) != 2 || at == 0)
        return false;
    char *point = line + at, *end = strchr(point, ' ');
    const char *type = strstr(point, " - ");
    if (!end || !type)
        return false;
    *end = '\0';
    unescape(point);
    return strcmp(point, mountpoint) == 0 && strncmp(type + 3, "fuse", 4) == 0;
}

void fs_readahead_prepare(fs_readahead *ra, const char *mountpoint, size_t bytes)
{
    *ra = (fs_readahead){ .bytes = bytes };
    if (!bytes)
        return;
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) {
        fs_log(LOG_WARNING, "read-ahead not set: /proc/self/mountinfo: %s", strerror(errno));
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    unsigned major, minor;
    /* the last line for the mount point is the mount on top */
    while (getline(&line, &cap, f) > 0)
        if (fuse_mount_at(line, mountpoint, &major, &minor)) {
            snprintf(ra->path, sizeof ra->path, "/sys/class/bdi/%u:%u/read_ahead_kb", major, minor);
            found = true;
        }
    free(line);
    fclose(f);
    if (!found)
        fs_log(LOG_WARNING, "read-ahead not set: %s is not in /proc/self/mountinfo", mountpoint);
    atomic_store(&ra->pending, found);
}

void fs_readahead_apply(fs_readahead *ra)
{
    if (!atomic_load_explicit(&ra->pending, memory_order_relaxed) ||
        !atomic_exchange(&ra->pending, 0))
        return;
    FILE *f = fopen(ra->path, "w");
    bool ok = f && fprintf(f, "%zu\n", ra->bytes >> 10) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fs_log(LOG_WARNING, "read-ahead not set: %s: %s", ra->path, strerror(errno));
}
