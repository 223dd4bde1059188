#include "fs/follow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fs/log.h"

/* (A remote archive replaced is refused by its reads: io/remote.h.) */
static void warn_if_replaced(fs_follow *f)
{
    if (f->told_replaced || tf_archive_is_remote(f->ar))
        return;
    struct stat named;
    const struct stat *held = f->opened;
    if (stat(f->archive, &named) == 0 && named.st_dev == held->st_dev &&
        named.st_ino == held->st_ino)
        return;
    f->told_replaced = true;
    fs_log(LOG_WARNING, "%s was replaced or removed (by trajpack gc?): this mount serves the "
           "archive it opened, without its later commits; remount to see them", f->archive);
}

/* Applies the commits found since the last look; whether it applied one. */
static bool look_once(fs_follow *f)
{
    bool changed;
    tf_error e;
    if (tf_archive_refresh(f->ar, f->applied, &changed, &e) < 0) {
        char msg[sizeof e.msg + 128];
        snprintf(msg, sizeof msg, "%s: new commits not applied: %s", f->archive, e.msg);
        fs_log_error_once(msg);
    }
    warn_if_replaced(f);
    return changed;
}

/* now + `after` on the clock of the condition variables. */
static struct timespec deadline(struct timespec after)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += after.tv_sec;
    until.tv_nsec += after.tv_nsec;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

static void *follow_main(void *arg)
{
    fs_follow *f = arg;
    pthread_mutex_lock(&f->lock);
    while (!f->stopping) {
        struct timespec until = deadline(f->interval);
        while (!f->stopping && !f->asked &&
               pthread_cond_timedwait(&f->wake, &f->lock, &until) != ETIMEDOUT)
            ;
        if (f->stopping)
            break;
        bool asked = f->asked;
        f->asked = false;
        unsigned long look = ++f->begun;
        pthread_mutex_unlock(&f->lock);
        bool changed = look_once(f);
        if (f->trace) /* an event tests wait for: a look that began after they changed the archive */
            fprintf(stderr, "trajfs: %s: follow: look %lu done%s\n", f->archive, look,
                    asked ? " (asked by a failed read)" : "");
        pthread_mutex_lock(&f->lock);
        f->ended = look;
        f->looks_applied += changed;
        pthread_cond_broadcast(&f->looked);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int fs_follow_start(fs_follow *f, tf_archive *ar, const tf_archive_hooks *applied,
                    const char *archive, const struct stat *opened, double seconds)
{
    time_t whole = (time_t)seconds;
    *f = (fs_follow){
        .ar = ar,
        .applied = applied,
        .archive = archive,
        .opened = opened,
        .interval = { .tv_sec = whole, .tv_nsec = (long)((seconds - (double)whole) * 1e9) },
        .trace = getenv("TRAJFS_FOLLOW_TRACE") != NULL,
    };
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&f->wake, &attr);
    pthread_cond_init(&f->looked, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&f->lock, NULL);
    if (pthread_create(&f->thread, NULL, follow_main, f) != 0) {
        pthread_cond_destroy(&f->wake);
        pthread_cond_destroy(&f->looked);
        pthread_mutex_destroy(&f->lock);
        return -1;
    }
    f->running = true;
    return 0;
}

void fs_follow_stop(fs_follow *f)
{
    if (!f->running)
        return;
    /* Requests are served no more: no read waits for a look. */
    pthread_mutex_lock(&f->lock);
    f->stopping = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->wake);
    pthread_cond_destroy(&f->looked);
    pthread_mutex_destroy(&f->lock);
    f->running = false;
}

uint64_t fs_follow_applied(fs_follow *f)
{
    if (!f->running)
        return 0;
    pthread_mutex_lock(&f->lock);
    uint64_t n = f->looks_applied;
    pthread_mutex_unlock(&f->lock);
    return n;
}

bool fs_follow_look_now(fs_follow *f, uint64_t applied)
{
    if (!f->running)
        return false;
    struct timespec until = deadline((struct timespec){ .tv_sec = FS_FOLLOW_ASK_WAIT_S });
    pthread_mutex_lock(&f->lock);
    unsigned long want = f->begun + 1;
    f->asked = true;
    pthread_cond_signal(&f->wake);
    while (!f->stopping && f->ended < want &&
           pthread_cond_timedwait(&f->looked, &f->lock, &until) != ETIMEDOUT)
        ;
    bool again = f->looks_applied != applied;
    pthread_mutex_unlock(&f->lock);
    return again;
}
