#include "fs/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fs_daemon_start(bool foreground, fs_daemon *d)
{
    d->verdict = -1;
    if (foreground)
        return 0;
    int pipefd[2];
    if (pipe(pipefd) < 0) {
        fprintf(stderr, "trajfs: cannot start the daemon: %s\n", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "trajfs: cannot start the daemon: %s\n", strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid > 0) { /* the parent: the child's verdict, or its death, ends it */
        close(pipefd[1]);
        char ok = 0;
        ssize_t n;
        while ((n = read(pipefd[0], &ok, 1)) < 0 && errno == EINTR)
            ;
        _exit(n == 1 && ok ? 0 : 1);
    }
    close(pipefd[0]);
    d->verdict = pipefd[1];
    (void)setsid(); /* no signal of the terminal's reaches the daemon */
    return 0;
}

static void tell(fs_daemon *d, char ok)
{
    if (d->verdict < 0)
        return;
    while (write(d->verdict, &ok, 1) < 0 && errno == EINTR)
        ;
    close(d->verdict);
    d->verdict = -1;
}

void fs_daemon_ready(fs_daemon *d)
{
    (void)chdir("/");
    if (d->verdict >= 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; null >= 0 && fd <= 2; fd++)
            (void)dup2(null, fd);
        if (null > 2)
            close(null);
    }
    tell(d, 1);
}

void fs_daemon_failed(fs_daemon *d)
{
    tell(d, 0);
}
