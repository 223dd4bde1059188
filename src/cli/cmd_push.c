/* trajpack push: keeps a copy of a local archive in object storage up to
 * date (store/push.h), once or, with --follow, as the local archive
 * grows. */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "store/push.h"

static const char push_usage[] =
    "Usage: trajpack push [OPTIONS] ARCHIVE URL\n"
    "Upload the commits of the local ARCHIVE that its copy at URL\n"
    "(s3://BUCKET/KEY) lacks, creating the copy where there is none. The copy\n"
    "holds the same bytes as ARCHIVE, whole commits at a time: a push that is\n"
    "killed leaves it at its last uploaded commits, and the next push goes on\n"
    "from there. A copy that is not the start of ARCHIVE (another writer\n"
    "wrote to it, or gc rewrote ARCHIVE) is refused.\n"
    "\nOptions:\n"
    "  -f, --follow[=SECONDS]  keep pushing the commits ARCHIVE gains, looking\n"
    "                          every SECONDS (default 5), until interrupted\n"
    "  -q, --quiet             print nothing but errors\n"
    "  -h, --help              show this help\n"
    "\nURL settings come from TRAJFS_REMOTE_OPTIONS (see trajpack(1)).\n";

static const struct option push_longopts[] = {
    { "follow", optional_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

#define FOLLOW_DEFAULT_S 5.0
#define FOLLOW_MAX_S 86400.0

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

typedef struct {
    const char *local, *url;
    double follow; /* seconds; 0: once */
    bool quiet;
} push_args;

static int parse_args(push_args *a, int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = push_usage, .shortopts = "f::qh",
                          .longopts = push_longopts };
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case 'f': {
            a->follow = FOLLOW_DEFAULT_S;
            if (optarg) {
                char *end;
                errno = 0;
                a->follow = strtod(optarg, &end);
                if (errno || end == optarg || *end || !(a->follow >= 0.1 && a->follow <= FOLLOW_MAX_S))
                    return cli_usage_error(argv[0], "--follow=%s: expected seconds from 0.1 to %.0f",
                                           optarg, FOLLOW_MAX_S);
            }
            break;
        }
        case 'q': a->quiet = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(argv[0], "expected a local ARCHIVE and a URL");
    a->local = argv[optind];
    a->url = argv[optind + 1];
    if (tf_io_is_url(a->local))
        return cli_usage_error(argv[0], "ARCHIVE is the local archive; the URL comes second");
    if (!tf_io_is_url(a->url))
        return cli_usage_error(argv[0], "%s: expected a URL (s3://BUCKET/KEY)", a->url);
    return -1;
}

/* Sleeps s seconds, or less when a stop is asked. */
static void nap(double s)
{
    for (double left = s; left > 0 && !stop_asked; left -= 0.1) {
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
    }
}

static int push_once(const push_args *a, tf_pusher *p, char *shown, bool *told_current)
{
    uint64_t commits, bytes;
    tf_error e;
    if (tf_pusher_push(p, a->local, &commits, &bytes, NULL, NULL, &e) < 0) {
        cli_file_error(a->url, e.msg);
        return CLI_EXIT_FAIL;
    }
    if (!a->quiet && (bytes || !*told_current)) {
        char size[CLI_SIZE_LEN];
        cli_format_size(bytes, size);
        if (bytes)
            printf("%s: pushed %llu commit%s (%s)\n", shown, (unsigned long long)commits,
                   commits == 1 ? "" : "s", size);
        else
            printf("%s: up to date\n", shown);
        fflush(stdout);
    }
    *told_current = bytes == 0;
    return CLI_EXIT_OK;
}

int cmd_push(int argc, char **argv)
{
    push_args a = { 0 };
    int rc = parse_args(&a, argc, argv);
    if (rc >= 0)
        return rc;
    tf_remote_opts remote;
    tf_error e;
    tf_pusher *p = NULL;
    if (cli_remote_opts(a.url, &remote, &e) < 0 || tf_pusher_open(a.url, &remote, &p, &e) < 0) {
        tf_remote_opts_free(&remote);
        cli_file_error(a.url, e.msg);
        return CLI_EXIT_FAIL;
    }
    char *shown = tf_io_shown_name(a.url);
    if (a.follow > 0) {
        struct sigaction sa = { .sa_handler = on_stop };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    bool told_current = false;
    do {
        rc = push_once(&a, p, shown ? shown : "the copy", &told_current);
        if (rc == CLI_EXIT_OK && a.follow > 0)
            nap(a.follow);
    } while (rc == CLI_EXIT_OK && a.follow > 0 && !stop_asked);
    tf_pusher_close(p);
    tf_remote_opts_free(&remote);
    free(shown);
    return rc;
}
