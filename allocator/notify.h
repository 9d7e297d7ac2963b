/*
 * notify: what the lower layers (placement, the extent hooks) tell the
 * library's owners of work (background.c) without calling up into them.
 * The owner registers its handlers once at start-up; until then, and in
 * unit tests that link only the lower layers, each call does nothing.
 * Called from extent hooks, the reclaim thread and the sampling of
 * allocation sites, never from the malloc fast path: each is one relaxed
 * load and an indirect call.
 */
#ifndef TM_NOTIFY_H
#define TM_NOTIFY_H

typedef struct tm_notify_ops_s {
  /* Memory was committed on some tier: a budget may now be crossable. */
  void (*committed)(void);
  /* The heap grew: an extent hook carved address space. */
  void (*heap_grew)(void);
  /* The reclaim thread moved a chunk, in the middle of a pass that may be
   * long (seconds under TCG): its periodic work may be due. */
  void (*progress)(void);
  /* A program thread allocated another sample gap of bytes (site.h's
   * countdown, TIERMALLOC_SITE_SAMPLE on average): on its way out of malloc,
   * outside jemalloc's locks. */
  void (*allocated)(void);
} tm_notify_ops_t;

/* Start-up (the top layer): ops stays valid for the life of the process. */
void tm_notify_set(const tm_notify_ops_t *ops);

void tm_notify_committed(void);
void tm_notify_heap_grew(void);
void tm_notify_progress(void);
void tm_notify_allocated(void);

#endif
