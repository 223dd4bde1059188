#include "cli/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/size.h"
#include "common/clock.h"

#define REDRAW_INTERVAL 0.1 /* seconds between two drawings of the bar */

struct cli_progress {
    pthread_mutex_t lock; /* encoder threads report concurrently */
    const char *label;
    uint64_t total, done;
    double start, last_draw;
    bool drawn; /* the bar is on the screen now */
};

/* The bar being shown, so that error messages can erase it first. Only
 * one exists at a time: trajpack runs one operation per process. */
static cli_progress *active;

cli_progress *cli_progress_start(const char *label, uint64_t total, bool quiet)
{
    if (quiet || !isatty(STDERR_FILENO))
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL; /* a missing bar is not worth failing for */
    pthread_mutex_init(&p->lock, NULL);
    p->label = label;
    p->total = total;
    p->start = tf_monotonic_seconds();
    p->last_draw = p->start; /* quick operations never show a bar */
    active = p;
    return p;
}

/* "1:05" or "2:03:10". */
static void format_duration(double seconds, char *out, size_t outsz)
{
    unsigned long s = seconds > 0 && seconds < 360000 ? (unsigned long)seconds : 0;
    if (s >= 3600)
        snprintf(out, outsz, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(out, outsz, "%lu:%02lu", s / 60, s % 60);
}

static void erase_locked(cli_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = false;
    }
}

static void draw_locked(cli_progress *p, double t)
{
    char done[CLI_SIZE_LEN], total[CLI_SIZE_LEN], rate_s[CLI_SIZE_LEN], eta[32];
    double elapsed = t - p->start;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    uint64_t left = p->done < p->total ? p->total - p->done : 0;
    unsigned pct = p->total ? (unsigned)(100.0 * (double)(p->total - left) / (double)p->total) : 100;

    cli_format_size(p->done, done);
    cli_format_size(p->total, total);
    cli_format_size((uint64_t)rate, rate_s);
    if (rate > 0)
        format_duration((double)left / rate, eta, sizeof eta);
    else
        snprintf(eta, sizeof eta, "?");
    fprintf(stderr, "\r%s %3u%%  %s / %s  %s/s  ETA %s\033[K", p->label, pct, done,
            total, rate_s, eta);
    fflush(stderr);
    p->drawn = true;
    p->last_draw = t;
}

void cli_progress_add(cli_progress *p, uint64_t bytes)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done += bytes;
    double t = tf_monotonic_seconds();
    if (t - p->last_draw >= REDRAW_INTERVAL)
        draw_locked(p, t);
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_hide(void)
{
    if (!active)
        return;
    pthread_mutex_lock(&active->lock);
    erase_locked(active);
    active->last_draw = 0; /* redraw on the next update */
    pthread_mutex_unlock(&active->lock);
}

void cli_progress_end(cli_progress *p)
{
    if (!p)
        return;
    erase_locked(p);
    if (active == p)
        active = NULL;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void on_rebasing(void *arg, uint64_t chunks, uint64_t bytes)
{
    cli_rebase_bar *b = arg;
    (void)chunks;
    cli_progress_end(b->bar);
    b->bar = cli_progress_start(b->label, bytes, b->quiet);
}

static void on_rebased(void *arg, uint64_t bytes)
{
    cli_progress_add(((cli_rebase_bar *)arg)->bar, bytes);
}

void cli_rebase_bar_hook(cli_rebase_bar *b, tf_write_opts *o)
{
    o->rebasing = on_rebasing;
    o->progress = on_rebased;
    o->progress_arg = b;
}

void cli_rebase_bar_end(cli_rebase_bar *b)
{
    cli_progress_end(b->bar);
    b->bar = NULL;
}
