/* trajpack's messages: errors on stderr, names made visible. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"

void cli_put_visible(FILE *f, const char *s)
{
    for (const char *c = s; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", (unsigned char)*c);
        else
            fputc(*c, f);
    }
}

/* Messages name files from file systems and archives: written with
 * cli_put_visible, so that a control character in one (an escape
 * sequence) never reaches the terminal and the message stays one line. */
void cli_error(const char *fmt, ...)
{
    va_list ap;
    char *msg = NULL;
    cli_progress_hide();
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    fputs("trajpack: ", stderr);
    cli_put_visible(stderr, msg ? msg : "out of memory");
    fputc('\n', stderr);
    free(msg);
}

/* Whether msg names file as a word of its own ("cannot open FILE: ..."). */
static bool mentions(const char *msg, const char *file)
{
    size_t n = strlen(file);
    for (const char *p = strstr(msg, file); n && p; p = strstr(p + 1, file)) {
        bool starts = p == msg || p[-1] == ' ' || p[-1] == '"';
        bool ends = !p[n] || strchr(":\" ", p[n]);
        if (starts && ends)
            return true;
    }
    return false;
}

void cli_file_error(const char *file, const char *msg)
{
    char *shown = tf_io_shown_name(file); /* a URL's secrets stay out */
    if (!shown || mentions(msg, shown))
        cli_error("%s", msg);
    else
        cli_error("%s: %s", shown, msg);
    free(shown);
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "trajpack %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'trajpack %s --help'.\n", verb);
    return CLI_EXIT_USAGE;
}
