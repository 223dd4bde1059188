/* Strings as JSON strings, for JSON output and for names that may hold
 * any character. */
#include "cli/cli.h"

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0 when p does not
 * start one (stray continuation byte, overlong form, surrogate, > U+10FFFF). */
static size_t utf8_sequence(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
        (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

static void put_escaped(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = utf8_sequence(p);
        if (len == 0) {
            /* File names need not be UTF-8; JSON output must be. */
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, len, f);
            p += len;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
}

void cli_put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    put_escaped(f, s);
    fputc('"', f);
}
