/* Names of remote objects (io.h's tf_io_is_url says which names are, and
 * tf_io_shown_name how messages show them). */
#ifndef TRAJFS_IO_URL_H
#define TRAJFS_IO_URL_H

#include "common/error.h"

/* The URL that a name tf_io_is_url accepts stands for, in *url
 * (malloc'd); EINVAL when there is none (the message never shows a URL
 * read from the environment or a file). */
int tf_url_resolve(const char *name, char **url, tf_error *e);

#endif
