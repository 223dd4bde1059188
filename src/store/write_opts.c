#include "store/write_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog.h"
#include "common/cpus.h"
#include "store/archive.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* A setting: its names, the bounds of its value (a flag has none), and
 * its description, in lines short enough for either help text. */
typedef struct {
    const char *name;   /* trajfs's spelling: -o max_chain=N */
    const char *option; /* trajpack's: --max-chain N */
    char short_option;  /* trajpack's one-letter spelling, or 0 */
    bool flag;          /* takes no value */
    unsigned min, max;
    size_t field;       /* offset of its unsigned or bool in tf_write_opts */
    const char *help;
} setting;

static const setting settings[] = {
    { "threads", "threads", 'T', false, 1, TF_WRITE_THREADS_MAX,
      offsetof(tf_write_opts, threads),
      "encoder threads, 1 to " STR(TF_WRITE_THREADS_MAX) " (default: one per\n"
      "online CPU)" },
    { "max_chain", "max-chain", 0, false, 0, TF_CHAIN_MAX, offsetof(tf_write_opts, max_chain),
      "longest chain of deltas before a keyframe, 0 to\n"
      STR(TF_CHAIN_MAX) " (default " STR(TF_MAX_CHAIN_DEFAULT) ")" },
    { "prog_budget", "budget", 0, false, 1, TF_PROG_BUDGET_MAX,
      offsetof(tf_write_opts, prog_budget),
      "search budget of the prog codec: expansions per\n"
      "tensor, 1 to " STR(TF_PROG_BUDGET_MAX) " (default " STR(TF_PROG_DEFAULT_BUDGET) ")" },
    { "search", "search", 0, true, 0, 0, offsetof(tf_write_opts, search),
      "search programs and try every codec on every chunk,\n"
      "as earlier releases did, instead of choosing from\n"
      "samples (6 to 40x slower; on the benchmark, 1% larger\n"
      "in all)" },
    { "all_programs", "all-programs", 0, true, 0, 0, offsetof(tf_write_opts, all_programs),
      "the search, and a program for every tensor, also one\n"
      "with a reference (float32 optimizer state about 1%\n"
      "smaller, writing 5x slower again)" },
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

void tf_write_opts_default(tf_write_opts *o)
{
    unsigned cpus = tf_online_cpus();
    *o = (tf_write_opts){ .threads = cpus < TF_WRITE_THREADS_MAX ? cpus : TF_WRITE_THREADS_MAX,
                          .max_chain = TF_MAX_CHAIN_DEFAULT };
}

bool tf_write_opts_newest_keyframes(const tf_write_opts *o)
{
    return o->max_chain < TF_CHAIN_MAX;
}

size_t tf_write_opts_held_bytes(const tf_write_opts *o)
{
    size_t cache = o->cache_bytes ? o->cache_bytes : TF_WRITE_CACHE_DEFAULT;
    size_t most = (size_t)32 << 20;
    return cache / 8 < most ? cache / 8 : most;
}

static int parse_number(const setting *s, const char *value, unsigned *out, tf_error *e)
{
    char *end = NULL;
    unsigned long v = 0;
    if (value && *value >= '0' && *value <= '9') {
        errno = 0;
        v = strtoul(value, &end, 10);
    }
    if (!end || *end || errno || v < s->min || v > s->max) {
        if (!value)
            return tf_fail(e, EINVAL, "expected a whole number from %u to %u", s->min, s->max);
        return tf_fail(e, EINVAL, "expected a whole number from %u to %u, got '%s'", s->min,
                       s->max, value);
    }
    *out = (unsigned)v;
    return 0;
}

int tf_write_opts_set(tf_write_opts *o, const char *name, const char *value, tf_error *e)
{
    const setting *s = NULL;
    for (size_t i = 0; i < NSETTINGS && !s; i++)
        if (!strcmp(settings[i].name, name))
            s = &settings[i];
    if (!s)
        return tf_fail(e, ENOENT, "not a writer setting");
    char *field = (char *)o + s->field;
    if (s->flag) {
        if (value)
            return tf_fail(e, EINVAL, "takes no value, got '%s'", value);
        *(bool *)field = true;
        if (s->field == offsetof(tf_write_opts, all_programs))
            o->search = true;
        return 0;
    }
    unsigned v = 0;
    if (parse_number(s, value, &v, e) < 0)
        return -1;
    *(unsigned *)field = v;
    return 0;
}

/* Where the descriptions start in each spelling's help text. */
#define OPTIONS_COLUMN 23
#define MOUNT_OPTIONS_COLUMN 27

void tf_write_opts_help(FILE *out, tf_write_opts_spelling spelling)
{
    bool mount = spelling == TF_WRITE_OPTS_MOUNT_OPTIONS;
    int column = mount ? MOUNT_OPTIONS_COLUMN : OPTIONS_COLUMN;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        int n;
        if (mount && !strcmp(s->name, "threads"))
            continue; /* trajfs lists it once, with its request threads */
        if (mount)
            n = fprintf(out, "    -o %s%s", s->name, s->flag ? "" : "=N");
        else if (s->short_option)
            n = fprintf(out, "  -%c, --%s%s", s->short_option, s->option, s->flag ? "" : " N");
        else
            n = fprintf(out, "      --%s%s", s->option, s->flag ? "" : " N");
        for (const char *line = s->help; *line;) {
            size_t len = strcspn(line, "\n");
            fprintf(out, "%*s%.*s\n", n < column ? column - n : 1, "", (int)len, line);
            line += len + (line[len] == '\n');
            n = 0;
        }
    }
}
