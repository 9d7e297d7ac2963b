/*
 * bench/pieces: can pieces of a chunk be told hot and moved up on their own,
 * from user space, on a real kernel (issue 17's "finer than a chunk")? The
 * mechanism tiermalloc would use, without tiermalloc: a heap of 2 MiB chunks
 * bound to a lower node (in huge pages where the kernel gives them), one
 * 64 KiB piece in eight read all the time by a thread, and in a loop:
 *
 *   1. split each chunk into piece VMAs (alternating memory policies on the
 *      same node: no page moves), which splits a huge page's mapping into
 *      4 KiB entries, each with its own accessed bit, and split the huge
 *      page itself (MADV_COLD on one page of it, below);
 *   2. clear the accessed bits ("1" then "4" to /proc/self/clear_refs: a
 *      split copies a huge page's one accessed bit to every entry, so the
 *      bits must be cleared after it), wait --interval, read each piece's
 *      Referenced: in /proc/self/smaps;
 *   3. merge the chunk back into one VMA (one mbind, no move);
 *   4. move the pages of the pieces seen to the top node (move_pages).
 *
 * It prints, per round, the pieces called hot against the true hot set
 * (precision, recall), where the hot and cold pages are (move_pages), the
 * VMAs of the heap after the merge, and the cost of each step; then a summary
 * line "pieces chunks= piece_kib= precision= recall= hot_on_top= cold_on_top=
 * vmas_after= split_ms= read_ms= merge_ms= move_ms= huge_before_kib=
 * huge_after_kib=" for the last round, and after --settle seconds (time for
 * khugepaged to collapse the moved pages back, if it does) hot_on_top again.
 *
 *   pieces [--chunks N] [--piece KiB] [--interval ms] [--rounds N] [--settle s]
 *          [--top NODE] [--low NODE] [--nohuge] [--no-folio-split]
 *
 * --nohuge: MADV_NOHUGEPAGE on the heap from the start (4 KiB pages only).
 * --no-folio-split: skip the MADV_COLD that splits each chunk's huge page
 * into 4 KiB folios after the VMA split (step 1), to see why it is needed.
 * Needs two nodes (the tiered VM: tests/vm/run --topology 2tier).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024ul
#define CHUNK (2048 * KIB)
#define PAGE 4096ul
#define HOT_EVERY 8   /* one piece in eight is hot */

static size_t nchunks = 32, piece = 64 * KIB, npieces;
static unsigned interval_ms = 500, rounds = 3, settle_s = 10;
static int top_node = 0, low_node = 1;
static bool nohuge, no_folio_split;
static char *heap;
static atomic_bool stop;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool is_hot(size_t p)
{
  return p % HOT_EVERY == 3;
}

/* Reads one word a page of every hot piece, in a loop. */
static void *reader(void *arg)
{
  volatile uint64_t sink = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    for (size_t p = 0; p < npieces; p++)
      if (is_hot(p))
        for (size_t off = 0; off < piece; off += PAGE) sink += *(volatile uint64_t *)(heap + p * piece + off);
  return arg;
}

static int bind(void *a, size_t len, int mode, int node, unsigned flags)
{
  unsigned long mask = 1ul << node;
  return (int)syscall(SYS_mbind, a, len, mode, &mask, 8 * sizeof mask, flags);
}

static void clear_refs(void)
{
  int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd < 0 || write(fd, "1", 1) != 1 || write(fd, "4", 1) != 1) {
    perror("pieces: clear_refs");
    exit(2);
  }
  close(fd);
}

/* Reads smaps: marks seen[p] for each piece VMA with a page referenced;
 * counts the heap's VMAs and its AnonHugePages (kB). */
static void read_smaps(bool *seen, size_t *vmas, size_t *huge_kib)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) {
    perror("pieces: smaps");
    exit(2);
  }
  char line[256];
  uintptr_t lo = 0, hi = 0, h0 = (uintptr_t)heap, h1 = h0 + nchunks * CHUNK;
  bool in = false;
  *vmas = 0, *huge_kib = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, kb;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      lo = a, hi = b;
      in = lo >= h0 && hi <= h1;
      *vmas += in;
      continue;
    }
    if (!in) continue;
    if (sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) *huge_kib += kb;
    if (seen && sscanf(line, "Referenced: %lu kB", &kb) == 1 && hi - lo == piece && kb > 0)
      seen[(lo - h0) / piece] = true;
  }
  fclose(f);
}

/* Pages of the hot and of the cold pieces on the top node. */
static void where(size_t *hot_top, size_t *cold_top)
{
  size_t n = nchunks * CHUNK / PAGE;
  void **pages = malloc(n * sizeof *pages);
  int *status = malloc(n * sizeof *status);
  for (size_t i = 0; i < n; i++) pages[i] = heap + i * PAGE;
  if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) perror("pieces: move_pages query");
  *hot_top = *cold_top = 0;
  for (size_t i = 0; i < n; i++)
    if (status[i] == top_node) {
      if (is_hot(i * PAGE / piece)) (*hot_top)++;
      else (*cold_top)++;
    }
  free(pages), free(status);
}

int main(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "0";
    if (!strcmp(argv[i], "--chunks")) nchunks = strtoul(v, NULL, 10), i++;
    else if (!strcmp(argv[i], "--piece")) piece = strtoul(v, NULL, 10) * KIB, i++;
    else if (!strcmp(argv[i], "--interval")) interval_ms = (unsigned)strtoul(v, NULL, 10), i++;
    else if (!strcmp(argv[i], "--rounds")) rounds = (unsigned)strtoul(v, NULL, 10), i++;
    else if (!strcmp(argv[i], "--settle")) settle_s = (unsigned)strtoul(v, NULL, 10), i++;
    else if (!strcmp(argv[i], "--top")) top_node = atoi(v), i++;
    else if (!strcmp(argv[i], "--low")) low_node = atoi(v), i++;
    else if (!strcmp(argv[i], "--nohuge")) nohuge = true;
    else if (!strcmp(argv[i], "--no-folio-split")) no_folio_split = true;
    else {
      fprintf(stderr, "usage: pieces [--chunks N] [--piece KiB] [--interval ms] [--rounds N] [--settle s] "
                      "[--top NODE] [--low NODE] [--nohuge] [--no-folio-split]\n");
      return 2;
    }
  }
  if (piece < PAGE || CHUNK % piece) {
    fprintf(stderr, "pieces: --piece must divide 2048 KiB\n");
    return 2;
  }
  npieces = nchunks * CHUNK / piece;
  char *raw = mmap(NULL, (nchunks + 1) * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return 2;
  heap = (char *)(((uintptr_t)raw + CHUNK - 1) & ~(CHUNK - 1));
  madvise(heap, nchunks * CHUNK, nohuge ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  if (bind(heap, nchunks * CHUNK, MPOL_BIND, low_node, 0) != 0) {
    perror("pieces: mbind");
    return 2;
  }
  for (size_t off = 0; off < nchunks * CHUNK; off += 8) *(uint64_t *)(heap + off) = off ^ 0x5bd1e995u;
  bool *seen = calloc(npieces, sizeof *seen);
  size_t vmas, huge_before, huge_after, hot_top = 0, cold_top = 0;
  read_smaps(NULL, &vmas, &huge_before);
  pthread_t th;
  pthread_create(&th, NULL, reader, NULL);
  double t_split = 0, t_read = 0, t_merge = 0, t_move = 0, precision = 0, recall = 0;
  size_t hot_pieces = 0;
  for (size_t p = 0; p < npieces; p++) hot_pieces += is_hot(p);
  for (unsigned r = 0; r < rounds; r++) {
    double t0 = now_ms();
    for (size_t p = 0; p < npieces; p++)
      if (bind(heap + p * piece, piece, p % 2 ? MPOL_BIND : MPOL_PREFERRED, low_node, 0) != 0) {
        perror("pieces: split");
        return 2;
      }
    /* The VMA split maps a huge page with 4 KiB entries but leaves it one
     * large folio, whose flags smaps counts for every page of it (all
     * referenced: precision 0.12 natively) and which move_pages would move
     * whole. MADV_COLD on a range that covers part of a large folio splits
     * it (and deactivates that one page). */
    if (!nohuge && !no_folio_split)
      for (size_t c = 0; c < nchunks; c++) madvise(heap + c * CHUNK, PAGE, MADV_COLD);
    double t1 = now_ms();
    clear_refs();
    usleep(interval_ms * 1000);
    double t2 = now_ms();
    memset(seen, 0, npieces * sizeof *seen);
    read_smaps(seen, &vmas, &huge_after);
    double t3 = now_ms();
    for (size_t c = 0; c < nchunks; c++) bind(heap + c * CHUNK, CHUNK, MPOL_BIND, low_node, 0);
    double t4 = now_ms();
    size_t called = 0, right = 0, n = 0;
    void **pages = malloc(nchunks * CHUNK / PAGE * sizeof *pages);
    int *nodes = malloc(nchunks * CHUNK / PAGE * sizeof *nodes), *status = malloc(nchunks * CHUNK / PAGE * sizeof *status);
    for (size_t p = 0; p < npieces; p++) {
      if (!seen[p]) continue;
      called++;
      right += is_hot(p);
      for (size_t off = 0; off < piece; off += PAGE) pages[n] = heap + p * piece + off, nodes[n++] = top_node;
    }
    if (n && syscall(SYS_move_pages, 0, n, pages, nodes, status, MPOL_MF_MOVE) < 0) perror("pieces: move_pages");
    double t5 = now_ms();
    free(pages), free(nodes), free(status);
    size_t vmas_after, huge_now;
    read_smaps(NULL, &vmas_after, &huge_now);
    where(&hot_top, &cold_top);
    precision = called ? (double)right / called : 0;
    recall = (double)right / hot_pieces;
    t_split = t1 - t0, t_read = t3 - t2, t_merge = t4 - t3, t_move = t5 - t4;
    vmas = vmas_after;
    printf("round=%u called=%zu precision=%.2f recall=%.2f hot_on_top=%.2f cold_on_top=%.3f vmas_after=%zu "
           "split_ms=%.1f read_ms=%.1f merge_ms=%.1f move_ms=%.1f huge_kib=%zu\n",
           r, called, precision, recall, (double)hot_top / (hot_pieces * piece / PAGE),
           (double)cold_top / ((npieces - hot_pieces) * piece / PAGE), vmas_after, t_split, t_read, t_merge,
           t_move, huge_now);
    fflush(stdout);
  }
  double hot_share = (double)hot_top / (hot_pieces * piece / PAGE);
  double cold_share = (double)cold_top / ((npieces - hot_pieces) * piece / PAGE);
  sleep(settle_s);
  where(&hot_top, &cold_top);
  atomic_store(&stop, true);
  pthread_join(th, NULL);
  size_t bad = 0;
  for (size_t off = 0; off < nchunks * CHUNK; off += 8) bad += *(uint64_t *)(heap + off) != (off ^ 0x5bd1e995u);
  printf("pieces chunks=%zu piece_kib=%zu precision=%.2f recall=%.2f hot_on_top=%.2f cold_on_top=%.3f vmas_after=%zu "
         "split_ms=%.1f read_ms=%.1f merge_ms=%.1f move_ms=%.1f huge_before_kib=%zu huge_after_kib=%zu "
         "hot_on_top_after_settle=%.2f settle_s=%u bad_words=%zu\n",
         nchunks, piece / KIB, precision, recall, hot_share, cold_share, vmas, t_split, t_read, t_merge, t_move,
         huge_before, huge_after, (double)hot_top / (hot_pieces * piece / PAGE), settle_s, bad);
  return bad != 0;
}
