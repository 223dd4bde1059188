#include "store/reclaim.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "store/give_back.h"
#include "store/liveness.h"
#include "store/writer.h"

static int allocated(const tf_archive *ar, uint64_t *bytes, uint64_t *size, tf_error *e)
{
    struct stat st;
    if (tf_archive_stat(ar, &st, e) < 0)
        return -1;
    *bytes = tf_archive_allocated(&st);
    *size = (uint64_t)st.st_size;
    return 0;
}

int tf_reclaim(const char *path, const tf_write_opts *opts, bool rebase_only,
               tf_reclaim_stats *st, tf_error *e)
{
    *st = (tf_reclaim_stats){ 0 };
    tf_writer *w;
    if (tf_writer_open(path, false, 0, opts, &w, e) < 0)
        return -1;
    tf_archive *ar = tf_writer_archive(w);
    int rc = allocated(ar, &st->allocated_before, &st->size, e);
    if (rc == 0)
        rc = tf_writer_rebase(w, &st->rebase, e);
    if (rc == 0 && !rebase_only) {
        uint8_t *live = tf_liveness(ar, NULL, e);
        rc = live ? tf_give_back_all(ar, live, e) : -1;
        free(live);
    }
    if (rc == 0)
        rc = allocated(ar, &st->allocated_after, &st->size, e);
    tf_writer_close(w);
    return rc;
}
