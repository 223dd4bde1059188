#include "io/curl_lib.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

tf_curl_lib tf_curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

/* dlsym returns an object pointer; POSIX guarantees that it converts to
 * a function pointer, which ISO C does not say: hence the copy. */
static int bind_symbol(void *lib, const char *name, void *fn, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(failure, sizeof failure, "libcurl has no %s", name);
        return -1;
    }
    memcpy(fn, &p, size);
    return 0;
}

#define BIND(lib, field) bind_symbol(lib, "curl_" #field, &tf_curl.field, sizeof tf_curl.field)

static void load(void)
{
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(failure, sizeof failure,
                 "cannot load libcurl (%s): remote archives need libcurl4 installed", dlerror());
        return;
    }
    CURLcode (*global_init)(long) = NULL;
    if (bind_symbol(lib, "curl_global_init", &global_init, sizeof global_init) < 0 ||
        BIND(lib, easy_init) < 0 || BIND(lib, easy_setopt) < 0 || BIND(lib, easy_getinfo) < 0 ||
        BIND(lib, easy_perform) < 0 ||
        BIND(lib, easy_cleanup) < 0 || BIND(lib, easy_strerror) < 0 ||
        BIND(lib, slist_append) < 0 || BIND(lib, slist_free_all) < 0 ||
        BIND(lib, share_init) < 0 || BIND(lib, share_setopt) < 0 ||
        BIND(lib, share_cleanup) < 0 || BIND(lib, multi_init) < 0 ||
        BIND(lib, multi_setopt) < 0 || BIND(lib, multi_add_handle) < 0 ||
        BIND(lib, multi_remove_handle) < 0 || BIND(lib, multi_perform) < 0 ||
        BIND(lib, multi_poll) < 0 || BIND(lib, multi_info_read) < 0 ||
        BIND(lib, multi_cleanup) < 0)
        return;
    CURLcode rc = global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        snprintf(failure, sizeof failure, "libcurl: %s", tf_curl.easy_strerror(rc));
}

int tf_curl_load(tf_error *e)
{
    pthread_once(&once, load);
    return failure[0] ? tf_fail(e, EIO, "%s", failure) : 0;
}
