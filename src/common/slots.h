/* Slots: a count of things that may be done at once (a counting
 * semaphore). A thread takes a slot before and gives it back after. */
#ifndef TRAJFS_COMMON_SLOTS_H
#define TRAJFS_COMMON_SLOTS_H

#include <pthread.h>

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    unsigned free;
} tf_slots;

/* n slots (at least one). */
void tf_slots_init(tf_slots *s, unsigned n);
void tf_slots_destroy(tf_slots *s);
/* Waits for a free slot and takes it. */
void tf_slot_take(tf_slots *s);
void tf_slot_give(tf_slots *s);

#endif
