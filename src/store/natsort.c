#include "store/natsort.h"

#include <ctype.h>
#include <string.h>

static size_t digit_run(const char *s)
{
    size_t n = 0;
    while (isdigit((unsigned char)s[n]))
        n++;
    return n;
}

int tf_natcmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            size_t na = digit_run(a), nb = digit_run(b);
            const char *da = a, *db = b;
            size_t la = na, lb = nb;
            while (la > 1 && *da == '0')
                da++, la--;
            while (lb > 1 && *db == '0')
                db++, lb--;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = memcmp(da, db, la);
            if (c)
                return c < 0 ? -1 : 1;
            if (na != nb) /* same value: fewer leading zeros first */
                return na < nb ? -1 : 1;
            a += na;
            b += nb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}
