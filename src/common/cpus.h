/* How many CPUs work can be spread over. */
#ifndef TRAJFS_COMMON_CPUS_H
#define TRAJFS_COMMON_CPUS_H

/* The CPUs online now (sysconf), at least 1 even when it cannot be told. */
unsigned tf_online_cpus(void);

#endif
