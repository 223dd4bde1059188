#include "common/slots.h"

void tf_slots_init(tf_slots *s, unsigned n)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->freed, NULL);
    s->free = n ? n : 1;
}

void tf_slots_destroy(tf_slots *s)
{
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->lock);
}

void tf_slot_take(tf_slots *s)
{
    pthread_mutex_lock(&s->lock);
    while (!s->free)
        pthread_cond_wait(&s->freed, &s->lock);
    s->free--;
    pthread_mutex_unlock(&s->lock);
}

void tf_slot_give(tf_slots *s)
{
    pthread_mutex_lock(&s->lock);
    s->free++;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->lock);
}
