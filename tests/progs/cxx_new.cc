// Every C++ operator new/delete variant, standard containers under churn,
// exceptions, and a few threads; prints what it checked and a checksum that
// depends only on the program's own computations (never on addresses), so
// the output is the same under any allocator. Exit status 0 when every
// check held, 1 otherwise (the failing checks are printed).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static int failures = 0;

static void check(bool ok, const char *what)
{
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

static bool aligned(const void *p, std::size_t a)
{
  return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}

// Sizes the optimiser cannot fold, so no allocation is elided or judged
// impossible at compile time.
static std::size_t opaque(std::size_t v)
{
  __asm__ volatile("" : "+r"(v));
  return v;
}

// The alignment malloc and operator new give an n-byte block: 16 from 16
// bytes on (glibc's MALLOC_ALIGNMENT); a smaller block only needs to hold
// objects that fit in it, so 8 from 8 bytes (jemalloc's tiny classes).
static bool fundamental(const void *p, std::size_t n)
{
  return aligned(p, n >= 16 ? 16 : n >= 8 ? 8 : 1);
}

static void touch(void *p, std::size_t n)
{
  std::memset(p, 0x5c, n);
  __asm__ volatile("" : : "r"(p) : "memory");
}

static void plain_and_array_forms()
{
  bool ok = true;
  for (std::size_t n : { 0, 1, 16, 100, 4096, 100000, 3 << 20 }) {
    void *p = ::operator new(opaque(n));
    void *a = ::operator new[](opaque(n));
    bool good = p && a && p != a && fundamental(p, n) && fundamental(a, n);
    if (!good) std::printf("  new(%zu): %p new[](%zu): %p\n", n, p, n, a);
    ok = ok && good;
    touch(p, n);
    touch(a, n);
    if (n % 2) {
      ::operator delete(p);
      ::operator delete[](a);
    } else {
      ::operator delete(p, n);     // sized
      ::operator delete[](a, n);
    }
  }
  check(ok, "operator new / new[] / delete / delete[] (plain and sized)");

  ok = true;
  for (std::size_t n : { 0, 8, 1000, 1 << 20 }) {
    void *p = ::operator new(opaque(n), std::nothrow);
    void *a = ::operator new[](opaque(n), std::nothrow);
    ok = ok && p && a && p != a;
    touch(p, n);
    touch(a, n);
    ::operator delete(p, std::nothrow);
    ::operator delete[](a, std::nothrow);
  }
  check(ok, "nothrow new / new[] and nothrow delete / delete[]");

  void *z1 = ::operator new(opaque(0)), *z2 = ::operator new(opaque(0));
  check(z1 && z2 && z1 != z2, "operator new(0) gives distinct pointers");
  ::operator delete(z1);
  ::operator delete(z2);
}

static void aligned_forms()
{
  bool ok = true;
  for (std::size_t al = 64; al <= 4096; al *= 2) {
    for (std::size_t n : { 1, 64, 100, 5000, 70000 }) {
      std::align_val_t a{ al };
      void *p = ::operator new(opaque(n), a);
      void *q = ::operator new[](opaque(n), a);
      void *r = ::operator new(opaque(n), a, std::nothrow);
      void *s = ::operator new[](opaque(n), a, std::nothrow);
      ok = ok && p && q && r && s && aligned(p, al) && aligned(q, al) && aligned(r, al) && aligned(s, al);
      touch(p, n);
      touch(q, n);
      touch(r, n);
      touch(s, n);
      if (n % 2) {
        ::operator delete(p, a);
        ::operator delete[](q, a);
      } else {
        ::operator delete(p, n, a);   // sized and aligned
        ::operator delete[](q, n, a);
      }
      ::operator delete(r, a, std::nothrow);
      ::operator delete[](s, a, std::nothrow);
    }
  }
  check(ok, "aligned new / new[] (64..4096, plain and nothrow) and every aligned delete");

  struct alignas(256) Wide {
    unsigned char b[256];
  };
  Wide *w = new Wide[7];
  Wide *one = new Wide;
  check(aligned(w, 256) && aligned(one, 256), "new of an over-aligned type");
  touch(w, sizeof(Wide) * 7);
  delete[] w;
  delete one;
}

static void failure_forms()
{
  const std::size_t huge = opaque(SIZE_MAX / 2);
  void *p = ::operator new(huge, std::nothrow);
  check(p == nullptr, "nothrow new of a huge size returns nullptr");
  void *q = ::operator new[](huge, std::nothrow);
  check(q == nullptr, "nothrow new[] of a huge size returns nullptr");
  void *r = ::operator new(huge, std::align_val_t{ 256 }, std::nothrow);
  check(r == nullptr, "aligned nothrow new of a huge size returns nullptr");

  bool threw = false;
  try {
    void *x = ::operator new(huge);
    ::operator delete(x);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  check(threw, "operator new of a huge size throws std::bad_alloc");

  threw = false;
  try {
    void *x = ::operator new[](huge, std::align_val_t{ 128 });
    ::operator delete[](x, std::align_val_t{ 128 });
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  check(threw, "aligned operator new[] of a huge size throws std::bad_alloc");

  threw = false;
  try {
    std::vector<char> v;
    v.reserve(opaque(SIZE_MAX / 4));
  } catch (const std::bad_alloc &) {
    threw = true;
  } catch (const std::length_error &) {
    threw = true;   // libstdc++ checks max_size() first
  }
  check(threw, "vector::reserve of a huge size throws");
}

// The standard's new-handler loop: operator new calls the handler while the
// allocation fails; a handler that uninstalls itself ends it with bad_alloc.
static int handler_calls = 0;
static void count_then_give_up()
{
  if (++handler_calls == 3) std::set_new_handler(nullptr);
}

static void new_handler_loop()
{
  std::set_new_handler(count_then_give_up);
  bool threw = false;
  try {
    void *x = ::operator new(opaque(SIZE_MAX / 2));
    ::operator delete(x);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  std::set_new_handler(nullptr);
  std::printf("new-handler called %d times\n", handler_calls);
  check(threw && handler_calls == 3, "new-handler loop, then bad_alloc");
}

static std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

static std::uint64_t lcg(std::uint64_t &s)
{
  s = s * 6364136223846793005ULL + 1442695040888963407ULL;
  return s >> 29;
}

// Containers under churn; returns a checksum of their contents.
static std::uint64_t churn(std::uint64_t seed, int rounds)
{
  std::uint64_t s = seed, h = seed;
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<std::uint64_t, std::string> u;
  std::vector<std::unique_ptr<std::string>> owned;
  for (int r = 0; r < rounds; r++) {
    std::uint64_t x = lcg(s);
    std::string key = "k" + std::to_string(x % 5000);
    auto &v = m[key];
    v.push_back(static_cast<int>(x % 1000));
    if (v.size() > 40) v.erase(v.begin(), v.begin() + 20);
    std::string val(static_cast<std::size_t>(x % 300), static_cast<char>('a' + x % 26));
    u[x % 20000] = val + key;
    if (x % 7 == 0) u.erase((x >> 8) % 20000);
    owned.emplace_back(new std::string(key + val));
    if (owned.size() > 500) owned.erase(owned.begin(), owned.begin() + 250);
    if (x % 1000 == 0) {
      try {
        throw std::runtime_error("round " + std::to_string(r) + " " + std::string(x % 2000, 'e'));
      } catch (const std::runtime_error &e) {
        h = mix(h, std::strlen(e.what()));
      }
    }
  }
  for (auto &kv : m) {
    h = mix(h, kv.first.size());
    for (int i : kv.second) h = mix(h, static_cast<std::uint64_t>(i));
  }
  std::vector<std::uint64_t> keys;
  for (auto &kv : u) keys.push_back(kv.first * 1000003 + kv.second.size());
  std::sort(keys.begin(), keys.end());
  for (auto k : keys) h = mix(h, k);
  for (auto &p : owned) h = mix(h, p->size());
  return h;
}

// thread_local objects are destroyed at thread exit, after the thread's
// last ordinary allocation and around the allocator's own thread teardown;
// these allocate and free in their destructors.
static std::atomic<long> tls_destroyed{ 0 };
struct TlsHeavy {
  std::vector<std::string> v;
  TlsHeavy() { for (int i = 0; i < 50; i++) v.emplace_back(static_cast<std::size_t>(i * 13), 'x'); }
  ~TlsHeavy()
  {
    std::map<int, std::string> m;
    for (int i = 0; i < 100; i++) m[i] = std::string(static_cast<std::size_t>(i * 7), 'y');
    long n = 0;
    for (auto &s : v) n += static_cast<long>(s.size());
    tls_destroyed += n + static_cast<long>(m.size());
  }
};
static thread_local TlsHeavy tls_heavy;

static void thread_local_teardown()
{
  std::vector<std::thread> ts;
  for (int i = 0; i < 32; i++)
    ts.emplace_back([] {
      std::string s(1000, 'z');
      tls_heavy.v.push_back(s);   // first use constructs it
    });
  for (auto &t : ts) t.join();
  std::printf("thread_local destructors: %ld\n", tls_destroyed.load());
  check(tls_destroyed.load() == 32 * (15925 + 1000 + 100), "thread_local destructors ran and allocated");
}

int main()
{
  plain_and_array_forms();
  aligned_forms();
  failure_forms();
  new_handler_loop();
  thread_local_teardown();

  std::uint64_t single = churn(1, 200000);
  std::printf("churn checksum %016llx\n", static_cast<unsigned long long>(single));

  // Threads churn in parallel; each result is deterministic on its own.
  std::uint64_t results[4] = {};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) ts.emplace_back([&results, i] { results[i] = churn(100 + i, 60000); });
  for (auto &t : ts) t.join();
  std::uint64_t all = 0;
  for (auto r : results) all = mix(all, r);
  std::printf("threaded churn checksum %016llx\n", static_cast<unsigned long long>(all));

  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
