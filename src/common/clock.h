/* The two clocks trajfs reads: the time of day, for the times of files,
 * and a clock that no change of the system time moves, for durations. */
#ifndef TRAJFS_COMMON_CLOCK_H
#define TRAJFS_COMMON_CLOCK_H

#include <time.h>

/* Now, as the time of day (CLOCK_REALTIME). */
void tf_time_of_day(struct timespec *ts);

/* Seconds on CLOCK_MONOTONIC: only differences mean anything. */
double tf_monotonic_seconds(void);

#endif
