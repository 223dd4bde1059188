#include "common/cpus.h"

#include <unistd.h>

unsigned tf_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}
