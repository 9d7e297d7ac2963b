#include "notify.h"

#include <stddef.h>

static const tm_notify_ops_t *_Atomic notify_ops;

void tm_notify_set(const tm_notify_ops_t *ops)
{
  __atomic_store_n(&notify_ops, ops, __ATOMIC_RELEASE);
}

void tm_notify_committed(void)
{
  const tm_notify_ops_t *ops = __atomic_load_n(&notify_ops, __ATOMIC_ACQUIRE);
  if (ops && ops->committed) ops->committed();
}

void tm_notify_heap_grew(void)
{
  const tm_notify_ops_t *ops = __atomic_load_n(&notify_ops, __ATOMIC_ACQUIRE);
  if (ops && ops->heap_grew) ops->heap_grew();
}

void tm_notify_progress(void)
{
  const tm_notify_ops_t *ops = __atomic_load_n(&notify_ops, __ATOMIC_ACQUIRE);
  if (ops && ops->progress) ops->progress();
}

void tm_notify_allocated(void)
{
  const tm_notify_ops_t *ops = __atomic_load_n(&notify_ops, __ATOMIC_ACQUIRE);
  if (ops && ops->allocated) ops->allocated();
}
