#include "fs/fs.h"

#include <errno.h>
#include <string.h>

int fs_state_open(fs_state *fs, const fs_options *o, tf_error *e)
{
    const char *archive = o->archive;
    *fs = (fs_state){ .direct_io = o->direct_io };
    if (tf_archive_open(archive, false, &fs->ar, e) < 0)
        return -1;
    if (fstat(tf_archive_container(fs->ar)->fd, &fs->archive_st) < 0) {
        tf_fail(e, errno, "%s: %s", archive, strerror(errno));
        goto fail;
    }
    if (fs_tree_build(fs->ar, &fs->tree, e) < 0) {
        tf_error_prefix(e, "%s", archive);
        goto fail;
    }
    fs->reader = tf_reader_new(fs->ar, o->cache_size);
    if (!fs->reader || fs_readbuf_init(&fs->readbuf) < 0) {
        tf_fail(e, ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < tf_archive_nentries(fs->ar); i++) {
        const tf_entry *ent = tf_archive_entry(fs->ar, i);
        if (ent->kind == TF_ENTRY_FILE || ent->kind == TF_ENTRY_SAFETENSORS)
            fs->total_bytes += ent->size;
    }
    return 0;
fail:
    tf_reader_free(fs->reader);
    fs_tree_free(&fs->tree);
    tf_archive_close(fs->ar);
    return -1;
}

void fs_state_close(fs_state *fs)
{
    fs_readbuf_destroy(&fs->readbuf);
    tf_reader_free(fs->reader);
    fs_tree_free(&fs->tree);
    tf_archive_close(fs->ar);
}
