/* hotness: the choice of source, the chunks the accessed bits make young
 * (from an smaps text of the test's own), the bound on chunks given a
 * VMA of their own, and the policies that give them one (real mbind on
 * this host's node 0). The real source (clear_refs and smaps of a running
 * process, VMAs split by policy) is checked in the tiered VM
 * (tests/vm/test_hotness.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture.h"
#include "chunkmap.h"
#include "hotness.h"
#include "kfile.h"
#include "migrate.h"
#include "options.h"
#include "os.h"
#include "range.h"
#include "tmptree.h"
#include "topology.h"

static tm_topology_t hn_topo;

static void hn_setup(void)
{
  tmptree_make(NULL);
  char *none[] = { NULL };
  tm_options_init_from(none, false);
  cr_assert_eq(tm_topology_discover(&hn_topo, "tests/fixtures/dram-cxl-6.12", NULL), 0);
  cr_assert_eq(tm_ranges_init(&hn_topo, (size_t)1 << 30, SIZE_MAX, &tm_os_linux), 0);
  cr_assert_eq(tm_chunkmap_init(), 0);
}

static void hn_teardown(void)
{
  tmptree_cleanup();
}

TestSuite(hotness, .init = hn_setup, .fini = hn_teardown);

static void hn_options(char **env, uint64_t max_split)
{
  tm_options_init_from(env, false);
  tm_hotness_init(tmptree, max_split);
}

static void hn_kernel_offers_it(void)
{
  tmptree_put("proc/self/clear_refs", "");
  tmptree_put("proc/self/smaps", "");
}

Test(hotness, auto_takes_the_accessed_bits_where_the_kernel_offers_them)
{
  char *none[] = { NULL };
  hn_options(none, 8);
  cr_expect_str_eq(tm_hotness_signal(), "commit age", "no clear_refs in the tree");
  hn_kernel_offers_it();
  hn_options(none, 8);
  cr_expect_str_eq(tm_hotness_signal(), "accessed bits");
  char *age[] = { "TIERMALLOC_HOTNESS=commit-age", NULL };
  hn_options(age, 8);
  cr_expect_str_eq(tm_hotness_signal(), "commit age");
  cr_expect(!tm_hotness_split(tm_chunk_of((void *)tm_range_lo(0))), "no VMA per chunk for the commit age");
}

Test(hotness, accessed_where_the_kernel_does_not_offer_it_is_said_once)
{
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", NULL };
  capture_begin();
  hn_options(env, 8);
  const char *out = capture_end();
  cr_expect_eq(capture_count_lines(out), 1, "%s", out);
  cr_expect(strstr(out, "TIERMALLOC_HOTNESS=accessed") != NULL, "%s", out);
  cr_expect_str_eq(tm_hotness_signal(), "commit age");
}

Test(hotness, off_calls_every_chunk_equally_cold)
{
  char *env[] = { "TIERMALLOC_HOTNESS=off", NULL };
  hn_options(env, 8);
  cr_expect_str_eq(tm_hotness_signal(), "none");
  tm_chunk_t *c = tm_chunk_of((void *)tm_range_lo(0));
  atomic_store(&c->age, (uint16_t)(atomic_load(&tm_hotness_now) - 500));
  cr_expect_eq(tm_hotness_age(c), 0);
}

Test(hotness, each_chunk_gets_a_vma_of_its_own_once_up_to_the_bound)
{
  hn_kernel_offers_it();
  char *none[] = { NULL };
  hn_options(none, 2);
  tm_chunk_t *c = tm_chunk_of((void *)tm_range_lo(0));
  tm_hotness_track(false);
  cr_expect(!tm_hotness_split(c), "no budget to reclaim by: no VMA per chunk");
  tm_hotness_track(true);
  cr_expect(tm_hotness_split(c));
  cr_expect(!tm_hotness_split(c), "once per chunk");
  cr_expect(tm_hotness_split(c + 1));
  cr_expect(!tm_hotness_split(c + 2), "two at most");
  cr_expect(atomic_load(&c[2].flags) == 0);
}

/* The smaps entry of a VMA of `chunks` chunks at lo: `rss` kB resident, of
 * which `ref` referenced and `huge` in huge pages (AnonHugePages: comes
 * after Referenced:, as in the kernel's). */
static int hn_vma_of(char *buf, size_t size, uintptr_t lo, unsigned chunks, unsigned rss, unsigned ref,
                     unsigned huge)
{
  return snprintf(buf, size,
                  "%lx-%lx rw-p 00000000 00:00 0 \n"
                  "Size:               %u kB\nRss:                %u kB\nReferenced:         %u kB\n"
                  "Anonymous:          %u kB\nAnonHugePages:      %u kB\n",
                  (unsigned long)lo, (unsigned long)(lo + chunks * TM_CHUNK_SIZE), chunks * 2048, rss, ref, rss,
                  huge);
}

/* The same with `kb` resident, all of it referenced, in 4 KiB pages. */
static int hn_vma(char *buf, size_t size, uintptr_t lo, unsigned chunks, unsigned kb)
{
  return hn_vma_of(buf, size, lo, chunks, kb, kb, 0);
}

/* What the scans wrote to the tree's clear_refs, into buf. */
static void hn_clear_refs_written(char *buf, size_t size)
{
  buf[0] = '\0';
  FILE *f = fopen(tmptree_path("proc/self/clear_refs"), "r");
  cr_assert_not_null(f);
  cr_expect_not_null(fgets(buf, (int)size, f));
  fclose(f);
}

Test(hotness, a_chunk_that_is_a_vma_with_a_page_referenced_is_young_again)
{
  hn_kernel_offers_it();
  char *env[] = { "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  hn_options(env, 64);
  uintptr_t lo = tm_range_lo(0);
  tm_chunk_t *c = tm_chunk_of((void *)lo);
  tm_hotness_tick();
  uint16_t old = (uint16_t)(atomic_load(&tm_hotness_now) - 300);
  for (int k = 0; k < 5; k++) atomic_store(&c[k].age, old);
  /* Chunk 0 referenced; 1 not; 2-3 one VMA (no per-chunk answer); 4 a
   * library's mapping of the same size elsewhere does not count. */
  char smaps[2048];
  int n = hn_vma(smaps, sizeof smaps, 0x10000, 1, 4);
  n += hn_vma(smaps + n, sizeof smaps - (size_t)n, lo, 1, 8);
  n += hn_vma(smaps + n, sizeof smaps - (size_t)n, lo + TM_CHUNK_SIZE, 1, 0);
  n += hn_vma(smaps + n, sizeof smaps - (size_t)n, lo + 2 * TM_CHUNK_SIZE, 2, 100);
  tmptree_put("proc/self/smaps", smaps);
  cr_expect(tm_hotness_scan(TM_SCAN_DUE), "the first scan clears");
  cr_expect(!tm_hotness_scan(TM_SCAN_DUE), "not again within the interval");
  char buf[16];
  hn_clear_refs_written(buf, sizeof buf);
  cr_expect_str_eq(buf, "14", "accessed bits, then soft-dirty (the TLB flush)");
  cr_expect_geq(tm_hotness_age(&c[0]), 300, "the first scan reads nothing");
  usleep(110 * 1000);
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect_lt(tm_hotness_age(&c[0]), 2, "referenced: young");
  cr_expect_geq(tm_hotness_age(&c[1]), 300, "not referenced: as old as before");
  cr_expect_geq(tm_hotness_age(&c[2]), 300, "a VMA of two chunks tells neither");
  cr_expect_geq(tm_hotness_age(&c[3]), 300);
  cr_expect_str_eq(tm_hotness_signal(), "accessed bits");
  cr_expect(atomic_load(&c[0].flags) & TM_CHUNK_SEEN, "seen at this read");
  cr_expect(!(atomic_load(&c[0].flags) & TM_CHUNK_STEADY), "but not at the one before");
  /* Seen again: steady. Chunk 1 seen now for the first time: not. */
  n = hn_vma(smaps, sizeof smaps, lo, 1, 8);
  n += hn_vma(smaps + n, sizeof smaps - (size_t)n, lo + TM_CHUNK_SIZE, 1, 4);
  tmptree_put("proc/self/smaps", smaps);
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect(tm_hotness_steady(&c[0]), "seen at two reads in a row");
  cr_expect(tm_hotness_hot(&c[1]) && !tm_hotness_steady(&c[1]), "seen at one");
  /* Not seen: neither. */
  hn_vma(smaps, sizeof smaps, lo, 1, 0);
  tmptree_put("proc/self/smaps", smaps);
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect(!(atomic_load(&c[0].flags) & (TM_CHUNK_SEEN | TM_CHUNK_STEADY)), "unseen clears both");
}

/* The heat: the share of a chunk's resident pages referenced at each read,
 * each read weighing half of what the chunk had; graded only in 4 KiB
 * pages. */
Test(hotness, heat_is_the_share_of_resident_pages_referenced_averaged_over_reads)
{
  hn_kernel_offers_it();
  char *env[] = { "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  hn_options(env, 64);
  uintptr_t lo = tm_range_lo(0);
  tm_chunk_t *c = tm_chunk_of((void *)lo);
  char smaps[1024];
  int n = hn_vma_of(smaps, sizeof smaps, lo, 1, 2048, 2048, 0);
  n += hn_vma_of(smaps + n, sizeof smaps - (size_t)n, lo + TM_CHUNK_SIZE, 1, 1024, 256, 0);
  hn_vma_of(smaps + n, sizeof smaps - (size_t)n, lo + 2 * TM_CHUNK_SIZE, 1, 2048, 2048, 2048);
  tmptree_put("proc/self/smaps", smaps);
  cr_expect(tm_hotness_scan(TM_SCAN_DUE), "the first scan clears");
  cr_expect_eq(tm_hotness_heat(&c[0]), 0, "nothing read yet");
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect_eq(tm_hotness_heat(&c[0]), 64, "every page: half of the full heat at the first read");
  cr_expect_eq(tm_hotness_heat(&c[1]), 16, "a quarter of its pages: half of a quarter");
  cr_expect_eq(tm_hotness_heat(&c[3]), 0, "not in smaps as a chunk: no heat");
  cr_expect(tm_hotness_graded(&c[0]) && tm_hotness_graded(&c[1]), "4 KiB pages");
  cr_expect_eq(tm_hotness_heat(&c[2]), 64, "a huge page seen");
  cr_expect(!tm_hotness_graded(&c[2]), "one accessed bit for the whole chunk: not graded");
  n = hn_vma_of(smaps, sizeof smaps, lo, 1, 2048, 2048, 0);
  hn_vma_of(smaps + n, sizeof smaps - (size_t)n, lo + TM_CHUNK_SIZE, 1, 1024, 0, 0);
  tmptree_put("proc/self/smaps", smaps);
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect_eq(tm_hotness_heat(&c[0]), 96, "used again: halfway up to the full heat");
  cr_expect_eq(tm_hotness_heat(&c[1]), 8, "unused: halfway down");
  char *age[] = { "TIERMALLOC_HOTNESS=commit-age", NULL };
  hn_options(age, 64);
  cr_expect_eq(tm_hotness_heat(&c[0]), 0, "no heat without the accessed bits");
  cr_expect(!tm_hotness_graded(&c[0]));
}

static uint64_t hn_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* With a window the bits are cleared, and read at the first scan after the
 * window's end (tm_hotness_read_due says when): only what the window
 * gathered. No scan waits for it. */
Test(hotness, a_window_clears_the_bits_and_reads_them_that_much_later)
{
  hn_kernel_offers_it();
  char *env[] = { "TIERMALLOC_HOTNESS_INTERVAL_MS=300", "TIERMALLOC_HOTNESS_WINDOW_MS=50", NULL };
  hn_options(env, 64);
  uintptr_t lo = tm_range_lo(0);
  tm_chunk_t *c = tm_chunk_of((void *)lo);
  tm_hotness_tick();
  uint16_t old = (uint16_t)(atomic_load(&tm_hotness_now) - 300);
  for (int k = 0; k < 2; k++) atomic_store(&c[k].age, old);
  char smaps[1024];
  int n = hn_vma(smaps, sizeof smaps, lo, 1, 8);
  hn_vma(smaps + n, sizeof smaps - (size_t)n, lo + TM_CHUNK_SIZE, 1, 0);
  tmptree_put("proc/self/smaps", smaps);
  cr_expect_eq(tm_hotness_read_due(), 0, "no window open");
  uint64_t t0 = hn_ms();
  cr_expect(!tm_hotness_scan(TM_SCAN_DUE), "the window opens: nothing read yet");
  cr_expect_lt(hn_ms() - t0, 40, "the scan does not wait for the window");
  char buf[16];
  hn_clear_refs_written(buf, sizeof buf);
  cr_expect_str_eq(buf, "14", "cleared at the window's start");
  uint64_t due = tm_hotness_read_due();
  cr_expect_geq(due / 1000000, t0 + 49, "read due a window later");
  cr_expect_leq(due / 1000000, hn_ms() + 50);
  cr_expect(!tm_hotness_scan(TM_SCAN_DUE), "not read before the window's end");
  cr_expect_geq(tm_hotness_age(&c[0]), 300);
  usleep(60 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE), "read after the window's end");
  cr_expect_eq(tm_hotness_read_due(), 0, "the window closed");
  cr_expect_lt(tm_hotness_age(&c[0]), 2, "used within the window: young at the first read");
  cr_expect_geq(tm_hotness_age(&c[1]), 300, "not used: as old as before");
  cr_expect(!tm_hotness_scan(TM_SCAN_DUE), "no new window within the interval");
}

Test(hotness, a_window_beyond_a_third_of_the_interval_is_said_and_cut)
{
  hn_kernel_offers_it();
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=300",
                  "TIERMALLOC_HOTNESS_WINDOW_MS=200", NULL };
  capture_begin();
  hn_options(env, 8);
  const char *out = capture_end();
  cr_expect_eq(capture_count_lines(out), 1, "%s", out);
  cr_expect(strstr(out, "TIERMALLOC_HOTNESS_WINDOW_MS=200") && strstr(out, "using 100"), "%s", out);
}

Test(hotness, smaps_without_referenced_falls_back_to_the_commit_age_and_says_so)
{
  hn_kernel_offers_it();
  char *env[] = { "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  hn_options(env, 64);
  tmptree_put("proc/self/smaps", "10000-12000 rw-p 00000000 00:00 0 \nRss: 4 kB\n");
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  usleep(110 * 1000);
  capture_begin();
  cr_expect(!tm_hotness_scan(TM_SCAN_DUE));
  const char *out = capture_end();
  cr_expect_eq(capture_count_lines(out), 1, "%s", out);
  cr_expect_str_eq(tm_hotness_signal(), "commit age");
}

/* The number of lines of /proc/self/maps starting in [lo, hi). */
static int hn_vmas_in(uintptr_t lo, uintptr_t hi, uintptr_t *starts, int max)
{
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert_not_null(f);
  unsigned long a, b;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a >= lo && a < hi && n < max) starts[n++] = a;
  fclose(f);
  return n;
}

Test(hotness, each_chunk_bound_while_splitting_is_a_vma_of_its_own)
{
  /* Real mbind on this host's node 0: a range bound as a whole, then an even
   * and an odd chunk side by side and an even chunk among unbound ones, all
   * to the range's own node. */
  size_t span = 8 * TM_CHUNK_SIZE;
  char *m = mmap(NULL, span + TM_CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(m, MAP_FAILED);
  char *p = (char *)(((uintptr_t)m + TM_CHUNK_SIZE - 1) & ~(uintptr_t)(TM_CHUNK_SIZE - 1));
  if (((uintptr_t)p >> 21) & 1) p += TM_CHUNK_SIZE;   /* chunk 0 even */
  span -= TM_CHUNK_SIZE;                              /* 7 chunks, inside m either way */
  tm_nodemask_t n0 = {{0}};
  tm_nodemask_set(&n0, 0);
  /* The marker tm_hotness_init takes: above this host's possible nodes. */
  tm_nodemask_t possible;
  cr_assert_eq(tm_kfile_read_nodelist("/sys/devices/system/node/possible", &possible), 0);
  int marker = TIER_MAX_NODES - 1;
  while (marker > 0 && !tm_nodemask_test(&possible, marker - 1)) marker--;
  tm_os_split_chunks(true, marker);
  cr_assert_eq(tm_os_linux.bind(p, span, &n0, 0), 0, "the range, plain");
  cr_assert_eq(tm_os_linux.bind(p + 2 * TM_CHUNK_SIZE, TM_CHUNK_SIZE, &n0, 0), 0);
  cr_assert_eq(tm_os_linux.bind(p + 3 * TM_CHUNK_SIZE, TM_CHUNK_SIZE, &n0, 0), 0);
  cr_assert_eq(tm_os_linux.bind(p + 6 * TM_CHUNK_SIZE, TM_CHUNK_SIZE, &n0, 0), 0);
  tm_os_split_chunks(false, -1);
  uintptr_t at[16], lo = (uintptr_t)p;
  int n = hn_vmas_in(lo, lo + span, at, 16);
  /* [0,2) [2] [3] [4,6) [6] */
  cr_assert_eq(n, 5, "%d VMAs", n);
  uintptr_t want[] = { 0, 2, 3, 4, 6 };
  for (int k = 0; k < 5; k++)
    cr_expect_eq(at[k], lo + want[k] * TM_CHUNK_SIZE, "VMA %d starts at chunk %lu", k,
                 (unsigned long)((at[k] - lo) / TM_CHUNK_SIZE));
  munmap(m, 9 * TM_CHUNK_SIZE);
}

/* The marker tm_hotness_init takes from the tree: this host's possible
 * nodes, so mbind here accepts the nodes above them. */
static int hn_host_marker(void)
{
  char possible[64] = "0\n";
  FILE *f = fopen("/sys/devices/system/node/possible", "r");
  if (f) {
    if (!fgets(possible, sizeof possible, f)) strcpy(possible, "0\n");
    fclose(f);
  }
  tmptree_put("sys/devices/system/node/possible", possible);
  tm_nodemask_t nodes;
  cr_assert_eq(tm_kfile_read_nodelist("/sys/devices/system/node/possible", &nodes), 0);
  int top = TIER_MAX_NODES - 1;
  while (top >= 0 && !tm_nodemask_test(&nodes, top)) top--;
  return top + 1;
}

/* Real mbind on this host's node 0: three chunks bound on their own side
 * by side (both parities next to the middle one), the middle one split into
 * pieces: one VMA per piece, none merged with a neighbour chunk, its data
 * where it was; one bind of the chunk merges it back. */
Test(hotness, a_chunk_split_into_pieces_is_a_vma_per_piece_and_one_bind_merges_it)
{
  char *m = mmap(NULL, 4 * TM_CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(m, MAP_FAILED);
  char *p = (char *)(((uintptr_t)m + TM_CHUNK_SIZE - 1) & ~(uintptr_t)(TM_CHUNK_SIZE - 1));
  tm_nodemask_t n0 = {{0}};
  tm_nodemask_set(&n0, 0);
  tm_os_split_chunks(true, hn_host_marker());
  for (int k = 0; k < 3; k++) cr_assert_eq(tm_os_linux.bind(p + k * TM_CHUNK_SIZE, TM_CHUNK_SIZE, &n0, 0), 0);
  char *mid = p + TM_CHUNK_SIZE;
  for (size_t off = 0; off < TM_CHUNK_SIZE; off += 4096) mid[off] = (char)(off >> 12);
  uintptr_t at[64], lo = (uintptr_t)p, hi = lo + 3 * TM_CHUNK_SIZE;
  cr_assert_eq(hn_vmas_in(lo, hi, at, 64), 3, "three chunks, three VMAs");
  cr_assert_eq(tm_os_linux.pieces(mid, &n0, 0), 0);
  int n = hn_vmas_in(lo, hi, at, 64);
  cr_expect_eq(n, 2 + (int)TM_PIECES, "%d VMAs: a chunk, %u pieces, a chunk", n, TM_PIECES);
  for (int k = 1; k < n - 1; k++)
    cr_expect_eq(at[k], (uintptr_t)mid + (uintptr_t)(k - 1) * (1u << TM_PIECE_SHIFT), "piece %d", k - 1);
  size_t bad = 0;
  for (size_t off = 0; off < TM_CHUNK_SIZE; off += 4096) bad += mid[off] != (char)(off >> 12);
  cr_expect_eq(bad, 0, "the pages keep their data");
  cr_assert_eq(tm_os_linux.bind(mid, TM_CHUNK_SIZE, &n0, 0), 0);
  cr_expect_eq(hn_vmas_in(lo, hi, at, 64), 3, "merged back: three chunks, three VMAs");
  tm_os_split_chunks(false, -1);
  cr_expect_eq(tm_os_linux.pieces(mid, &n0, 0), ENOTSUP, "no pieces while chunks are not split");
  munmap(m, 4 * TM_CHUNK_SIZE);
}

/* smaps entries of the 32 piece VMAs of the chunk at lo, each with 64 kB
 * resident; `ref` (bit i: piece i) all referenced. */
static int hn_pieces_smaps(char *buf, size_t size, uintptr_t lo, uint32_t ref)
{
  int n = 0;
  for (unsigned i = 0; i < TM_PIECES; i++) {
    uintptr_t a = lo + ((uintptr_t)i << TM_PIECE_SHIFT);
    n += snprintf(buf + n, size - (size_t)n,
                  "%lx-%lx rw-p 00000000 00:00 0 \nRss:                64 kB\nReferenced:         %u kB\n"
                  "AnonHugePages:       0 kB\n",
                  (unsigned long)a, (unsigned long)(a + (1u << TM_PIECE_SHIFT)), ref >> i & 1 ? 64u : 0u);
  }
  return n;
}

/* A chunk reclaim samples is split into pieces for the scan that clears
 * the bits (real mbind on this host's node 0, in the tier range), read per
 * piece at the next scan, which says which pieces were seen, sums them into
 * the chunk's heat, and merges the chunk back into one VMA. */
Test(hotness, a_sampled_chunk_is_read_per_piece_and_merged_back)
{
  hn_kernel_offers_it();
  hn_host_marker();
  char *env[] = { "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  hn_options(env, 64);
  tm_migrate_init(&hn_topo);
  uintptr_t lo = tm_range_lo(0) + 4 * TM_CHUNK_SIZE;
  tm_chunk_t *c = tm_chunk_of((void *)lo);
  cr_expect(!tm_hotness_sample(c), "not a VMA of its own yet");
  atomic_store(&c->committed, 4096);   /* placed: tm_migrate_split holds it */
  atomic_fetch_or(&c->flags, TM_CHUNK_SPLIT);
  cr_assert_eq(tm_os_linux.bind((void *)lo, TM_CHUNK_SIZE, &hn_topo.tier[0].nodes, hn_topo.tier[0].first_node), 0);
  cr_expect(tm_hotness_sample(c));
  cr_expect(tm_hotness_scan(TM_SCAN_DUE), "the first scan splits, then clears");
  uintptr_t at[64];
  cr_expect_eq(hn_vmas_in(lo, lo + TM_CHUNK_SIZE, at, 64), (int)TM_PIECES, "one VMA per piece while the bits gather");
  char smaps[8192];
  hn_pieces_smaps(smaps, sizeof smaps, lo, 1u << 3 | 1u << 7);
  tmptree_put("proc/self/smaps", smaps);
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  tm_chunk_t *got[4];
  uint32_t seen[4];
  cr_assert_eq(tm_hotness_pieces_seen(got, seen, 4), 1);
  cr_expect_eq(got[0], c);
  cr_expect_eq(seen[0], 1u << 3 | 1u << 7, "pieces 3 and 7 seen: %#x", seen[0]);
  cr_expect(tm_hotness_hot(c), "seen: young");
  cr_expect_eq(tm_hotness_heat(c), (0 + 127 * 128 / 2048 + 1) / 2, "2 of 32 pieces: their share, averaged in");
  cr_expect(tm_hotness_graded(c));
  cr_expect_eq(hn_vmas_in(lo, lo + TM_CHUNK_SIZE, at, 64), 1, "merged back after the read");
  /* Not sampled again: the next read has no pieces to say. */
  usleep(110 * 1000);
  tm_hotness_tick();
  cr_expect(tm_hotness_scan(TM_SCAN_DUE));
  cr_expect_eq(tm_hotness_pieces_seen(got, seen, 4), 0);
  atomic_store(&c->committed, 0);
}
