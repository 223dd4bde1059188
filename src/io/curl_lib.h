/* libcurl, loaded when a remote archive is first opened rather than when
 * a program starts: a trajpack or trajfs that reads only local archives
 * does not load libcurl and the thirty libraries it needs (3 ms of CPU
 * at every start, a twentieth of a `trajpack add` of one checkpoint). */
#ifndef TRAJFS_IO_CURL_LIB_H
#define TRAJFS_IO_CURL_LIB_H

#include <curl/curl.h>

#include "common/error.h"

typedef struct {
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLSH *(*share_init)(void);
    CURLSHcode (*share_setopt)(CURLSH *, CURLSHoption, ...);
    CURLSHcode (*share_cleanup)(CURLSH *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd[], unsigned, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_cleanup)(CURLM *);
} tf_curl_lib;

/* The functions, once tf_curl_load succeeded. */
extern tf_curl_lib tf_curl;

/* Loads libcurl (once, from any thread) and initializes it: 0, or -1
 * with a message naming what is missing. */
int tf_curl_load(tf_error *e);

#endif
