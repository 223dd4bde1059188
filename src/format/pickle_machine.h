/* What the two halves of the pickle interpreter (format/pickle.h) share:
 * the machine that runs the opcodes (pickle.c) and, once it reaches STOP,
 * the naming of its storages by walking the saved object (pickle_paths.c). */
#ifndef TRAJFS_FORMAT_PICKLE_MACHINE_H
#define TRAJFS_FORMAT_PICKLE_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "format/pickle.h"

/* ---- values ---- */

/* pickle.c's kind_names names each, for messages. */
typedef enum {
    V_NONE, V_BOOL, V_INT, V_BIGINT, V_FLOAT, V_STR, V_BYTES,
    V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR,
} kind;

typedef struct container container;

/* What the stack and the memo hold. Numbers other than ints are not kept:
 * nothing the interpreter reports depends on them. */
typedef struct {
    kind kind;
    size_t len; /* V_STR, V_BYTES */
    union {
        int64_t i;        /* V_BOOL, V_INT */
        const uint8_t *s; /* V_STR, V_BYTES: in the pickle */
        container *c;     /* V_TUPLE, V_LIST, V_DICT */
        size_t index;     /* V_GLOBAL: of globals; V_STORAGE, V_TENSOR: of storages */
    } u;
} value;

/* A tuple, list or dict (items key, value, key, value, ...). Containers
 * are shared, as the memo shares them, and may hold themselves. */
struct container {
    value *items;
    size_t n, cap;
    value state;    /* what BUILD gave a dict; V_NONE when nothing */
    unsigned depth; /* containers nested in it, itself included, as they were put in */
    bool visited;   /* by the walk */
};

/* A global as GLOBAL or STACK_GLOBAL names it (pickle.c). */
typedef struct global global;

/* A storage as one BINPERSID names it. At STOP, the ones of one key
 * become a group, which the first of them stands for. */
typedef struct {
    const uint8_t *key; /* in the pickle */
    size_t key_len;
    uint64_t nbytes;
    tf_dtype dtype; /* TF_DT_NONE until a storage class or a tensor says */
    size_t offset;  /* of the BINPERSID */
    size_t group;   /* the first of its key, once grouped */
    char *path;     /* of the group, on its first: set by the walk */
} storage;

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    size_t op_pos; /* the opcode running, for messages */
    uint8_t op;
    value *stack;
    size_t sp, stack_cap;
    size_t marks[TF_PICKLE_MAX_DEPTH]; /* stack positions of the open marks */
    size_t nmarks;
    value *memo;
    size_t nmemo, memo_cap;
    container **containers; /* every one made, to free them */
    size_t ncontainers, containers_cap;
    global *globals;
    size_t nglobals, globals_cap;
    storage *storages; /* in the order of their BINPERSIDs */
    size_t nstorages, storages_cap;
    size_t spent; /* bytes held, of TF_PICKLE_BUDGET(len) */
    tf_error *e;
} machine;

/* ---- messages (pickle.c) ---- */

/* Bytes of a pickle's string that a message shows. */
#define SHOWN_MAX 60

/* Fails with EINVAL: "pickle offset N, OPCODE: message". */
__attribute__((format(printf, 2, 3))) int tf_pickle_fail(machine *m, const char *fmt, ...);
/* Fails (EINVAL: a pickle that cannot be interpreted in the memory
 * there is, whose file is kept as opaque bytes). */
int tf_pickle_nomem(machine *m);
/* Counts bytes the machine is about to hold against its budget: -1
 * (EINVAL, with the reason) when they would exceed it. */
int tf_pickle_charge(machine *m, size_t bytes);
/* The key of s as a message may show it. */
const char *tf_pickle_storage_key(const storage *s, char out[SHOWN_MAX + 4]);

/* Runs the pickle of a machine made with p, len and e set, up to its
 * STOP, which must be its last byte: 0, or -1 (e says why). */
int tf_pickle_run(machine *m);
void tf_pickle_machine_free(machine *m);


#endif
