#include "cli/size.h"

#include <stdio.h>

void cli_format_size(uint64_t bytes, char out[CLI_SIZE_LEN])
{
    static const char *const units[] = { "kB", "MB", "GB", "TB", "PB", "EB" };
    if (bytes < 1000) {
        snprintf(out, CLI_SIZE_LEN, "%u B", (unsigned)bytes);
        return;
    }
    double v = (double)bytes / 1000;
    size_t u = 0;
    /* 999.96 kB would print as "1000.0 kB": switch units before rounding. */
    while (v >= 999.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1000;
        u++;
    }
    snprintf(out, CLI_SIZE_LEN, "%.1f %s", v, units[u]);
}
