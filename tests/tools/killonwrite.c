/* killonwrite: kills a process as a file is written, for the crash tests.
 * A kill timed by the clock rarely falls on the short end of a commit
 * (its writes, fdatasync and reply); one timed by the writes does.
 *
 *   killonwrite FILE PID SKIP TIMEOUT_MS
 *
 * Watches FILE for writes (inotify IN_MODIFY; writes in a row that it has
 * not read yet count once), prints "watching" once the watch is in place,
 * and sends SIGKILL to PID (-PGID: a process group) at the write after
 * the first SKIP. Exits 0 once it killed, 1 when TIMEOUT_MS passed or
 * SIGTERM came first (PID is left alone; it prints "N writes seen": with
 * a large SKIP, how many writes a run makes), 2 on a usage or system
 * error. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

/* Reads the inotify events waiting on fd: how many are writes (0 when
 * the read fails). */
static long modifies(int fd)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(fd, buf, sizeof buf);
    long writes = 0;
    for (ssize_t at = 0; at < n;) {
        const struct inotify_event *ev = (const struct inotify_event *)(buf + at);
        writes += (ev->mask & IN_MODIFY) != 0;
        at += (ssize_t)sizeof *ev + ev->len;
    }
    return writes;
}

static long number(const char *s, const char *what, long least)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < least) {
        fprintf(stderr, "killonwrite: %s: not a number: %s\n", what, s);
        exit(2);
    }
    return v;
}

static volatile sig_atomic_t terminated;

static void on_term(int sig)
{
    (void)sig;
    terminated = 1;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: killonwrite FILE PID SKIP TIMEOUT_MS\n");
        return 2;
    }
    const long pid = number(argv[2], "PID", INT_MIN + 1L), skip = number(argv[3], "SKIP", 0);
    const long deadline = now_ms() + number(argv[4], "TIMEOUT_MS", 0);
    if (pid == 0 || pid == -1 || pid > INT_MAX) {
        fprintf(stderr, "killonwrite: PID %ld: not one process or group\n", pid);
        return 2;
    }
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, argv[1], IN_MODIFY) < 0) {
        fprintf(stderr, "killonwrite: %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    /* SIGTERM is taken only while waiting in ppoll. */
    sigset_t term, waiting;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    struct sigaction sa = { .sa_handler = on_term };
    sigemptyset(&sa.sa_mask);
    if (sigprocmask(SIG_BLOCK, &term, &waiting) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
        fprintf(stderr, "killonwrite: SIGTERM: %s\n", strerror(errno));
        return 2;
    }
    sigdelset(&waiting, SIGTERM);
    printf("watching\n");
    fflush(stdout);
    long seen = 0;
    for (long left; !terminated && (left = deadline - now_ms()) > 0;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        struct timespec wait = { .tv_sec = left / 1000, .tv_nsec = left % 1000 * 1000000 };
        int ready = ppoll(&p, 1, &wait, &waiting);
        if (ready < 0 && errno != EINTR) {
            fprintf(stderr, "killonwrite: poll: %s\n", strerror(errno));
            return 2;
        }
        if (ready <= 0)
            continue;
        long writes = modifies(fd);
        if (writes > skip - seen) {
            if (kill((pid_t)pid, SIGKILL) < 0) {
                fprintf(stderr, "killonwrite: kill %ld: %s\n", pid, strerror(errno));
                return 2;
            }
            return 0;
        }
        seen += writes;
    }
    /* Writes that came before SIGTERM and were not read yet count too:
     * a run ended just before its writes were all read (a loaded
     * machine) is not a run that wrote nothing. */
    struct pollfd pending = { .fd = fd, .events = POLLIN };
    long writes;
    while (terminated && poll(&pending, 1, 0) > 0 && (writes = modifies(fd)) > 0)
        seen += writes;
    printf("%ld writes seen\n", seen);
    return 1;
}
