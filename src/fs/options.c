#include "fs/options.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CACHE_MIN ((size_t)64 << 20)
#define CACHE_MAX_DEFAULT ((size_t)4 << 30)
#define THREADS_MAX 1024

enum { KEY_RW };

static const struct fuse_opt trajfs_opts[] = {
    { "cache_size=%s", offsetof(fs_options, cache_size_arg), 0 },
    { "threads=%u", offsetof(fs_options, threads), 0 },
    FUSE_OPT_KEY("rw", KEY_RW),
    FUSE_OPT_END,
};

/* Takes the first non-option (the archive) and keeps the second (the
 * mount point, for fuse_parse_cmdline). */
static int take_arg(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    fs_options *o = data;
    if (key == KEY_RW) {
        o->rw = true;
        return 0;
    }
    if (key != FUSE_OPT_KEY_NONOPT || o->archive)
        return 1;
    o->archive = strdup(arg);
    if (!o->archive) {
        fprintf(stderr, "trajfs: out of memory\n");
        return -1;
    }
    return 0;
}

/* Binary shift of a size suffix, 0 when c is none. */
static unsigned suffix_shift(char c)
{
    switch (c) {
    case 'k': case 'K': return 10;
    case 'm': case 'M': return 20;
    case 'g': case 'G': return 30;
    case 't': case 'T': return 40;
    default: return 0;
    }
}

int fs_parse_size(const char *s, size_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = suffix_shift(*end);
    if (shift) {
        end++;
        if (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

size_t fs_default_cache_size(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return CACHE_MIN;
    uint64_t eighth = (uint64_t)pages * (uint64_t)page / 8;
    if (eighth > CACHE_MAX_DEFAULT)
        return CACHE_MAX_DEFAULT;
    return eighth < CACHE_MIN ? CACHE_MIN : (size_t)eighth;
}

int fs_options_parse(struct fuse_args *args, fs_options *o)
{
    *o = (fs_options){ 0 };
    if (fuse_opt_parse(args, o, trajfs_opts, take_arg) < 0)
        return -1;
    o->cache_size = fs_default_cache_size();
    if (o->cache_size_arg && fs_parse_size(o->cache_size_arg, &o->cache_size) < 0) {
        fprintf(stderr, "trajfs: cache_size=%s: expected bytes, optionally with K, M, G or T\n",
                o->cache_size_arg);
        return -1;
    }
    if (o->threads > THREADS_MAX) {
        fprintf(stderr, "trajfs: threads=%u: at most %d\n", o->threads, THREADS_MAX);
        return -1;
    }
    return 0;
}

void fs_options_free(fs_options *o)
{
    free(o->archive);
    free(o->cache_size_arg);
}

void fs_options_help(void)
{
    printf("trajfs options:\n"
           "    -o cache_size=SIZE     bytes of reconstructed chunks kept in memory, with\n"
           "                           a suffix K, M, G or T (default: 1/8 of RAM, between\n"
           "                           64M and 4G; here %zuM)\n"
           "    -o threads=N           at most N threads serve requests (default 10)\n"
           "    -o ro                  read-only (the default; rw is not supported yet)\n",
           fs_default_cache_size() >> 20);
}
