/* The remote settings in force (io/remote.h): those given to
 * tf_remote_configure, else TRAJFS_REMOTE_OPTIONS over the defaults. */
#ifndef TRAJFS_IO_REMOTE_CONFIG_H
#define TRAJFS_IO_REMOTE_CONFIG_H

#include "common/error.h"
#include "io/remote_opts.h"

int tf_remote_settings(const tf_remote_opts **out, tf_error *e);

#endif
