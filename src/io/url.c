/* Names of remote objects: what io.h's tf_io_is_url accepts, the URL
 * such a name stands for, and the URL as messages may show it. */
#include "io/url.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

/* A URL named by where it is kept (io.h). */
#define FROM_ENV "url-env:"
#define FROM_FILE "url-file:"
/* The longest URL read from a file, newline included. */
#define URL_MAX 8192

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool is_plain_url(const char *s)
{
    return has_prefix(s, "http://") || has_prefix(s, "https://") || has_prefix(s, "s3://");
}

bool tf_io_is_url(const char *path)
{
    return is_plain_url(path) || has_prefix(path, FROM_ENV) || has_prefix(path, FROM_FILE);
}

char *tf_io_shown_name(const char *url)
{
    if (!is_plain_url(url))
        return strdup(url);
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    size_t authority = strcspn(host, "/?#");
    const char *rest = host;
    for (size_t i = 0; i < authority; i++) /* after the last '@': a password may hold one */
        if (host[i] == '@')
            rest = host + i + 1;
    char *shown;
    if (asprintf(&shown, "%.*s%.*s", (int)(host - url), url, (int)strcspn(rest, "?#"), rest) < 0)
        return NULL;
    return shown;
}

/* The first line of the file at path, in *url. */
static int read_url_file(const char *path, char **url, tf_error *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return tf_fail(e, errno, FROM_FILE "%s: %s", path, strerror(errno));
    char *buf = malloc(URL_MAX + 1);
    size_t n = 0;
    ssize_t got = 1;
    while (buf && n < URL_MAX && !memchr(buf, '\n', n) && (got = read(fd, buf + n, URL_MAX - n)) > 0)
        n += (size_t)got;
    int err = got < 0 ? errno : 0;
    close(fd);
    if (!buf)
        return tf_fail(e, ENOMEM, "out of memory");
    if (err) {
        free(buf);
        return tf_fail(e, err, FROM_FILE "%s: %s", path, strerror(err));
    }
    buf[n] = '\0';
    size_t len = strcspn(buf, "\n");
    if (len == URL_MAX) {
        free(buf);
        return tf_fail(e, EINVAL, FROM_FILE "%s: its first line is longer than %d bytes", path,
                       URL_MAX - 1);
    }
    buf[len] = '\0';
    *url = buf;
    return 0;
}

int tf_url_resolve(const char *name, char **url, tf_error *e)
{
    char *u = NULL;
    if (has_prefix(name, FROM_ENV)) {
        const char *v = getenv(name + strlen(FROM_ENV));
        if (!v || !*v)
            return tf_fail(e, EINVAL, "%s: the variable is not set", name);
        u = strdup(v);
    } else if (has_prefix(name, FROM_FILE)) {
        if (read_url_file(name + strlen(FROM_FILE), &u, e) < 0)
            return -1;
    } else {
        u = strdup(name);
    }
    if (!u)
        return tf_fail(e, ENOMEM, "out of memory");
    u[strcspn(u, "\r")] = '\0'; /* a file written on Windows */
    bool control = false;
    for (const unsigned char *p = (const unsigned char *)u; *p; p++)
        control |= *p < 0x20 || *p == 0x7f;
    /* Never shown: what it holds is a secret. */
    if (control || !is_plain_url(u)) {
        free(u);
        return tf_fail(e, EINVAL, "%s: %s", name, control ? "the URL holds control characters"
                                                         : "not an http://, https:// or s3:// URL");
    }
    *url = u;
    return 0;
}
