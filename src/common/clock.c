#include "common/clock.h"

void tf_time_of_day(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
}

double tf_monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
