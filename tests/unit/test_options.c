/*
 * options: the parser for each type, loading from a given environment (and
 * from the process environment), the warnings word for word, tm_option_size,
 * and env.example against the table.
 *
 * Criterion runs each test in its own process, so the option values and the
 * once-only tm_options_init start fresh in every test.
 * Run from the repository root: env.example is read from there.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

#define KiB 1024ULL

/* ---- helpers ---------------------------------------------------------------- */

static tm_option_value_t opt_ok(tm_option_id_t id, const char *text)
{
  tm_option_value_t v;
  memset(&v, 0x5a, sizeof v);
  int err = tm_option_parse(id, text, &v);
  cr_assert_eq(err, 0, "%s: '%s' gave %d", tm_option_descs[id].name, text, err);
  cr_assert(!v.set, "%s: '%s' parse must not claim set", tm_option_descs[id].name, text);
  return v;
}

static uint64_t opt_num(tm_option_id_t id, const char *text)
{
  return opt_ok(id, text).num;
}

/* Expects err, and *out left exactly as it was. */
static void opt_bad(tm_option_id_t id, const char *text, int want)
{
  tm_option_value_t v, before;
  memset(&v, 0x5a, sizeof v);
  before = v;
  int err = tm_option_parse(id, text, &v);
  cr_assert_eq(err, want, "%s: '%s' gave %d, want %d", tm_option_descs[id].name, text, err, want);
  cr_assert(memcmp(&v, &before, sizeof v) == 0, "%s: '%s' touched *out on error",
            tm_option_descs[id].name, text);
}

static bool opt_same(const tm_option_value_t *a, const tm_option_value_t *b)
{
  return a->num == b->num && a->percent == b->percent && a->set == b->set &&
         strcmp(a->str, b->str) == 0;
}

/* Option i holds its default, unset. */
static void opt_is_default(unsigned i)
{
  tm_option_value_t def;
  cr_assert_eq(tm_option_parse((tm_option_id_t)i, tm_option_descs[i].def, &def), 0);
  cr_assert(opt_same(tm_option((tm_option_id_t)i), &def), "%s is not its default",
            tm_option_descs[i].name);
}

/* Removes every TIERMALLOC_* variable, so the tests that read the process
 * environment do not depend on the caller's. */
static void opt_clear_env(void)
{
  extern char **environ;
  for (bool again = true; again;) {
    again = false;
    for (char **e = environ; *e != NULL; e++) {
      if (strncmp(*e, "TIERMALLOC_", 11) != 0) continue;
      char name[256];
      size_t n = strcspn(*e, "=");
      cr_assert_lt(n, sizeof name);
      memcpy(name, *e, n);
      name[n] = '\0';
      unsetenv(name);
      again = true;
      break;
    }
  }
}

/* ---- BOOL ------------------------------------------------------------------- */

Test(options, bool_words)
{
  static const char *const yes[] = {"1", "true", "TRUE", "True", "yes", "YES", "yEs", "on", "ON", "On"};
  static const char *const no[] = {"0", "false", "FALSE", "False", "no", "NO", "No", "off", "OFF", "oFf"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    cr_assert_eq(opt_num(TM_OPTION_VERBOSE, yes[i]), 1, "'%s'", yes[i]);
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    cr_assert_eq(opt_num(TM_OPTION_VERBOSE, no[i]), 0, "'%s'", no[i]);
  cr_assert_eq(opt_num(TM_OPTION_VERBOSE, "  yes\t"), 1);
  cr_assert_eq(opt_num(TM_OPTION_STATS, " json "), 2);
}

Test(options, bool_bad)
{
  static const char *const bad[] = {"", "  ", "2", "-1", "01", "tru", "truee", "y", "n", "o",
                                    "of", "yes!", "1 0", "enable", "onn", "0x1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) opt_bad(TM_OPTION_VERBOSE, bad[i], EINVAL);
}

/* ---- UINT ------------------------------------------------------------------- */

Test(options, uint_good)
{
  cr_assert_eq(opt_num(TM_OPTION_NARENAS, "0"), 0);
  cr_assert_eq(opt_num(TM_OPTION_NARENAS, "42"), 42);
  cr_assert_eq(opt_num(TM_OPTION_NARENAS, "007"), 7);
  cr_assert_eq(opt_num(TM_OPTION_DIRTY_DECAY_MS, "  10000 \n"), 10000);
  cr_assert_eq(opt_num(TM_OPTION_DIRTY_DECAY_MS, "9223372036854775807"), 9223372036854775807ULL);
}

Test(options, uint_junk)
{
  static const char *const bad[] = {"", " ", "-1", "+1", "1x", "x1", "0x10", "1 2", "1.0", "1e3",
                                    "1K", "10%", "１", "\t-0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) opt_bad(TM_OPTION_NARENAS, bad[i], EINVAL);
}

Test(options, uint_overflow)
{
  opt_bad(TM_OPTION_NARENAS, "9223372036854775808", ERANGE);   /* 2^63 */
  opt_bad(TM_OPTION_NARENAS, "18446744073709551615", ERANGE);  /* 2^64-1 */
  opt_bad(TM_OPTION_NARENAS, "18446744073709551616", ERANGE);  /* 2^64 */
  opt_bad(TM_OPTION_NARENAS, "99999999999999999999999999999", ERANGE);
  /* Junk wins over size: the text is not a number at all. */
  opt_bad(TM_OPTION_NARENAS, "99999999999999999999999999999x", EINVAL);
}

/* ---- SIZE ------------------------------------------------------------------- */

Test(options, size_plain_bytes)
{
  tm_option_value_t v = opt_ok(TM_OPTION_RESERVE, "4096");
  cr_assert_eq(v.num, 4096);
  cr_assert(!v.percent);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "0"), 0);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "4096B"), 4096);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "4096b"), 4096);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, " 12345 "), 12345);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "9223372036854775807"), 9223372036854775807ULL);
}

Test(options, size_every_suffix)
{
  static const char *const units[] = {"K", "M", "G", "T", "P"};
  static const char *const tails[] = {"", "B", "iB", "b", "ib", "IB", "Ib", "iB"};
  for (unsigned u = 0; u < 5; u++) {
    uint64_t mult = 1ULL << (10 * (u + 1));
    for (unsigned t = 0; t < sizeof tails / sizeof tails[0]; t++) {
      for (int lower = 0; lower < 2; lower++) {
        char text[32];
        snprintf(text, sizeof text, "3%c%s", lower ? units[u][0] - 'A' + 'a' : units[u][0],
                 tails[t]);
        tm_option_value_t v = opt_ok(TM_OPTION_RESERVE, text);
        cr_assert_eq(v.num, 3 * mult, "'%s' gave %llu", text, (unsigned long long)v.num);
        cr_assert(!v.percent, "'%s'", text);
      }
    }
  }
}

Test(options, size_examples)
{
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "64K"), 64 * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "64KB"), 64 * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "64KiB"), 64 * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "512m"), 512 * KiB * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "2G"), 2 * KiB * KiB * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "1T"), KiB * KiB * KiB * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "\t 16G  "), 16 * KiB * KiB * KiB);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "0K"), 0);
}

Test(options, size_percent)
{
  static const struct { const char *text; uint64_t n; } good[] = {
    {"0%", 0}, {"1%", 1}, {"50%", 50}, {"100%", 100}, {" 7% ", 7}, {"050%", 50},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    tm_option_value_t v = opt_ok(TM_OPTION_TOPTIER_MAX, good[i].text);
    cr_assert(v.percent, "'%s'", good[i].text);
    cr_assert_eq(v.num, good[i].n, "'%s'", good[i].text);
  }
  static const char *const bad[] = {"101%", "1000%", "99999999999999999999999%", "%", "50 %",
                                    "50%%", "5K%", "50%B", "-5%", "1.5%", "%50"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    opt_bad(TM_OPTION_TOPTIER_MAX, bad[i], EINVAL);
  /* A plain SIZE has no whole to take a percentage of. */
  opt_bad(TM_OPTION_RESERVE, "50%", EINVAL);
}

Test(options, size_junk)
{
  static const char *const bad[] = {"12Q", "1.5G", "-1", "+1", "", "   ", "K", "KB", "iB", "B",
                                    "1KK", "1KBB", "1KiBB", "1iB", "1Bi", "1 K", "1K B", "1Ki",
                                    "0x10", "1E", "1Z", "G1", "1,5G", "1_000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) opt_bad(TM_OPTION_RESERVE, bad[i], EINVAL);
}

Test(options, size_overflow)
{
  opt_bad(TM_OPTION_RESERVE, "99999999999T", ERANGE);
  opt_bad(TM_OPTION_RESERVE, "9223372036854775808", ERANGE);   /* 2^63 bytes */
  opt_bad(TM_OPTION_RESERVE, "99999999999999999999999", ERANGE);
  opt_bad(TM_OPTION_RESERVE, "8388608T", ERANGE);              /* 2^23 TiB = 2^63 */
  opt_bad(TM_OPTION_RESERVE, "8192P", ERANGE);                 /* 2^13 PiB = 2^63 */
  opt_bad(TM_OPTION_RESERVE, "9007199254740992K", ERANGE);     /* 2^53 KiB = 2^63 */
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "8388607T"), 8388607ULL << 40);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "8191PiB"), 8191ULL << 50);
  cr_assert_eq(opt_num(TM_OPTION_RESERVE, "9007199254740991K"), 9007199254740991ULL << 10);
}

/* ---- ENUM and STRING -------------------------------------------------------- */

Test(options, enum_words)
{
  cr_assert_eq(opt_num(TM_OPTION_STATS, "none"), 0);
  cr_assert_eq(opt_num(TM_OPTION_STATS, "text"), 1);
  cr_assert_eq(opt_num(TM_OPTION_STATS, "json"), 2);
  cr_assert_eq(opt_num(TM_OPTION_STATS, "TEXT"), 1);
  cr_assert_eq(opt_num(TM_OPTION_STATS, " Json\t"), 2);
  static const char *const bad[] = {"", " ", "js", "jsonx", "texts", "none|text", "|", "text|",
                                    "0", "1", "yaml", "no ne"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) opt_bad(TM_OPTION_STATS, bad[i], EINVAL);
}

Test(options, string_values)
{
  cr_assert_str_eq(opt_ok(TM_OPTION_TIERS, "").str, "");
  cr_assert_str_eq(opt_ok(TM_OPTION_TIERS, "0,1;2;3").str, "0,1;2;3");
  cr_assert_str_eq(opt_ok(TM_OPTION_STATS_FILE, "  /tmp/a b.txt \n").str, "/tmp/a b.txt");

  char text[TM_OPT_STRING_MAX + 8];
  memset(text, 'x', TM_OPT_STRING_MAX - 1);
  text[TM_OPT_STRING_MAX - 1] = '\0';
  tm_option_value_t v = opt_ok(TM_OPTION_STATS_FILE, text);   /* 255 bytes: fits */
  cr_assert_eq(strlen(v.str), TM_OPT_STRING_MAX - 1);
  cr_assert_str_eq(v.str, text);

  memset(text, 'x', TM_OPT_STRING_MAX);
  text[TM_OPT_STRING_MAX] = '\0';
  opt_bad(TM_OPTION_STATS_FILE, text, ERANGE);                 /* 256 bytes */

  /* 255 bytes inside spaces still fit: the spaces are not part of the value. */
  memset(text, ' ', sizeof text);
  memset(text + 2, 'y', TM_OPT_STRING_MAX - 1);
  text[sizeof text - 1] = '\0';
  cr_assert_eq(strlen(opt_ok(TM_OPTION_STATS_FILE, text).str), TM_OPT_STRING_MAX - 1);
}

/* ---- the table -------------------------------------------------------------- */

Test(options, table_and_defaults)
{
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) {
    const tm_option_desc_t *d = &tm_option_descs[i];
    cr_assert_not_null(d->name, "option %u", i);
    cr_assert_not_null(d->def, "%s", d->name);
    cr_assert_not_null(d->doc, "%s", d->name);
    cr_assert_eq(d->type == TM_OPT_ENUM, d->choices != NULL, "%s: choices iff ENUM", d->name);
    tm_option_value_t v;
    cr_assert_eq(tm_option_parse((tm_option_id_t)i, d->def, &v), 0, "%s: default '%s'", d->name,
                 d->def);
    opt_is_default(i);   /* before any init */
  }
  cr_assert_str_eq(tm_option_descs[TM_OPTION_TIERS].name, "TIERS");
  cr_assert_str_eq(tm_option_descs[TM_OPTION_BACKGROUND_THREAD].name, "BACKGROUND_THREAD");
  cr_assert_eq(tm_option_parse(TM_OPTION_COUNT, "1", &(tm_option_value_t){0}), EINVAL);
}

/* ---- loading ---------------------------------------------------------------- */

Test(options, init_from_empty_gives_defaults, .init = cr_redirect_stderr)
{
  char *env[] = {"PATH=/bin", "HOME=/", NULL};
  tm_options_init_from(env, false);
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) opt_is_default(i);
  /* The defaults the rest of tiermalloc is written for. */
  cr_assert_eq(tm_option(TM_OPTION_RESERVE)->num, 1ULL << 40);
  cr_assert(tm_option(TM_OPTION_TOPTIER_MAX)->percent);
  cr_assert_eq(tm_option(TM_OPTION_TOPTIER_MAX)->num, 100);
  cr_assert_eq(tm_option(TM_OPTION_STATS)->num, 0);
  cr_assert_str_eq(tm_option(TM_OPTION_TIERS)->str, "");
  tm_options_init_from(NULL, false);
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) opt_is_default(i);
  cr_assert_stderr_eq_str("");
}

Test(options, init_from_good_values, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_RESERVE=64G",  "TIERMALLOC_TOPTIER_MAX= 25% ",
                 "TIERMALLOC_STATS=JSON",   "TIERMALLOC_TIERS=0,1;2",
                 "TIERMALLOC_VERBOSE=yes",  "TIERMALLOC_NARENAS=8",
                 "TIERMALLOC_STATS_FILE=",  NULL};
  tm_options_init_from(env, false);
  cr_assert_eq(tm_option(TM_OPTION_RESERVE)->num, 64ULL << 30);
  cr_assert(tm_option(TM_OPTION_RESERVE)->set);
  cr_assert(tm_option(TM_OPTION_TOPTIER_MAX)->percent);
  cr_assert_eq(tm_option(TM_OPTION_TOPTIER_MAX)->num, 25);
  cr_assert_eq(tm_option(TM_OPTION_STATS)->num, 2);
  cr_assert_str_eq(tm_option(TM_OPTION_TIERS)->str, "0,1;2");
  cr_assert_eq(tm_option(TM_OPTION_VERBOSE)->num, 1);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 8);
  cr_assert(tm_option(TM_OPTION_STATS_FILE)->set);
  opt_is_default(TM_OPTION_DIRTY_DECAY_MS);
  opt_is_default(TM_OPTION_BACKGROUND_THREAD);

  /* A second call starts again from the defaults. */
  char *env2[] = {"TIERMALLOC_NARENAS=3", NULL};
  tm_options_init_from(env2, false);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 3);
  opt_is_default(TM_OPTION_RESERVE);
  opt_is_default(TM_OPTION_STATS);
  cr_assert_stderr_eq_str("");
}

Test(options, init_from_bad_size_keeps_default, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_RESERVE=12Q", NULL};
  tm_options_init_from(env, false);
  opt_is_default(TM_OPTION_RESERVE);
  char want[128];
  snprintf(want, sizeof want,
           "tiermalloc: TIERMALLOC_RESERVE='12Q' is not a size; using default (%s)\n",
           tm_option_descs[TM_OPTION_RESERVE].def);
  cr_assert_stderr_eq_str(want);
}

Test(options, init_from_every_message, .init = cr_redirect_stderr)
{
  char long_file[300 + sizeof "TIERMALLOC_STATS_FILE="];
  strcpy(long_file, "TIERMALLOC_STATS_FILE=");
  memset(long_file + strlen(long_file), 'f', 300);
  long_file[sizeof long_file - 1] = '\0';
  char *env[] = {"TIERMALLOC_TIERS=0;1",                  /* good */
                 "TIERMALLOC_TOPTIER_MAX=150%",
                 "TIERMALLOC_RESERVE=99999999999T",
                 "TIERMALLOC_NARENAS=four",
                 "TIERMALLOC_DIRTY_DECAY_MS=99999999999999999999",
                 "TIERMALLOC_BACKGROUND_THREAD=maybe",
                 "TIERMALLOC_STATS=yaml",
                 long_file,
                 "TIERMALLOC_VERBOSE=",
                 NULL};
  tm_options_init_from(env, false);
  cr_assert_str_eq(tm_option(TM_OPTION_TIERS)->str, "0;1");
  for (unsigned i = TM_OPTION_TOPTIER_MAX; i < TM_OPTION_COUNT; i++) opt_is_default(i);
  /* The defaults come from the table, so a changed default needs no edit here. */
  const tm_option_desc_t *o = tm_option_descs;
  char want[2048];
  snprintf(want, sizeof want,
           "tiermalloc: TIERMALLOC_TOPTIER_MAX='150%%' is not a size or a percentage; using default (%s)\n"
           "tiermalloc: TIERMALLOC_RESERVE='99999999999T' is too large; using default (%s)\n"
           "tiermalloc: TIERMALLOC_NARENAS='four' is not a number; using default (%s)\n"
           "tiermalloc: TIERMALLOC_DIRTY_DECAY_MS='99999999999999999999' is too large; "
           "using default (%s)\n"
           "tiermalloc: TIERMALLOC_BACKGROUND_THREAD='maybe' is not one of auto|on|off; using default (%s)\n"
           "tiermalloc: TIERMALLOC_STATS='yaml' is not one of none|text|json|prom; using default (%s)\n"
           "tiermalloc: TIERMALLOC_STATS_FILE='"
           "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff..."
           "' is longer than 255 bytes; using default (%s)\n",
           o[TM_OPTION_TOPTIER_MAX].def, o[TM_OPTION_RESERVE].def, o[TM_OPTION_NARENAS].def,
           o[TM_OPTION_DIRTY_DECAY_MS].def, o[TM_OPTION_BACKGROUND_THREAD].def,
           o[TM_OPTION_STATS].def, o[TM_OPTION_STATS_FILE].def);
  cr_assert_stderr_eq_str(want);
}

/* A value cannot break the one-line rule. */
/* VAR= unsets: the default, with no warning; an empty STRING is a value. */
Test(options, init_from_empty_value_is_the_default_quietly, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_VERBOSE=", "TIERMALLOC_STATS=", "TIERMALLOC_RESERVE=",
                 "TIERMALLOC_STATS_FILE=", NULL};
  tm_options_init_from(env, false);
  opt_is_default(TM_OPTION_VERBOSE);
  opt_is_default(TM_OPTION_STATS);
  opt_is_default(TM_OPTION_RESERVE);
  cr_assert_str_eq(tm_option(TM_OPTION_STATS_FILE)->str, "");
  cr_assert_stderr_eq_str("");
}

Test(options, init_from_control_bytes_in_value, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_NARENAS=1\n2", NULL};
  tm_options_init_from(env, false);
  opt_is_default(TM_OPTION_NARENAS);
  char want[128];
  snprintf(want, sizeof want,
           "tiermalloc: TIERMALLOC_NARENAS='1?2' is not a number; using default (%s)\n",
           tm_option_descs[TM_OPTION_NARENAS].def);
  cr_assert_stderr_eq_str(want);
}

Test(options, init_from_unknown_variable, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_FOO=1",       "TIERMALLOC_NARENAS=2", "TIERMALLOCX=1",
                 "XTIERMALLOC_FOO=1",      "TIERMALLOC_tiers=0",   "TIERMALLOC_STAT=text",
                 "TIERMALLOC_STATSX=text", "TIERMALLOC_NOVALUE",   NULL};
  tm_options_init_from(env, false);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 2);
  opt_is_default(TM_OPTION_STATS);
  cr_assert_stderr_eq_str("tiermalloc: unknown option TIERMALLOC_FOO ignored\n"
                          "tiermalloc: unknown option TIERMALLOC_tiers ignored\n"
                          "tiermalloc: unknown option TIERMALLOC_STAT ignored\n"
                          "tiermalloc: unknown option TIERMALLOC_STATSX ignored\n"
                          "tiermalloc: unknown option TIERMALLOC_NOVALUE ignored\n");
}

/* The first of two entries for one name wins, as with getenv. */
Test(options, init_from_first_entry_wins, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_NARENAS=5", "TIERMALLOC_NARENAS=junk", NULL};
  tm_options_init_from(env, false);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 5);
  cr_assert_stderr_eq_str("");
}

Test(options, init_reads_environment_once, .init = cr_redirect_stderr)
{
  opt_clear_env();
  setenv("TIERMALLOC_RESERVE", "2T", 1);
  setenv("TIERMALLOC_STATS", "text", 1);
  setenv("TIERMALLOC_VERBOSE", "nope", 1);   /* stays at its default */
  setenv("TIERMALLOC_BOGUS", "1", 1);
  tm_options_init();
  cr_assert_eq(tm_option(TM_OPTION_RESERVE)->num, 2ULL << 40);
  cr_assert(tm_option(TM_OPTION_RESERVE)->set);
  cr_assert_eq(tm_option(TM_OPTION_STATS)->num, 1);
  opt_is_default(TM_OPTION_VERBOSE);

  setenv("TIERMALLOC_RESERVE", "3T", 1);
  tm_options_init();   /* does nothing: no new value, no second warning */
  cr_assert_eq(tm_option(TM_OPTION_RESERVE)->num, 2ULL << 40);
  char want[256];
  snprintf(want, sizeof want,
           "tiermalloc: TIERMALLOC_VERBOSE='nope' is not a boolean; using default (%s)\n"
           "tiermalloc: unknown option TIERMALLOC_BOGUS ignored\n",
           tm_option_descs[TM_OPTION_VERBOSE].def);
  cr_assert_stderr_eq_str(want);
}

/* ---- tm_option_size --------------------------------------------------------- */

Test(options, size_of_bytes_ignores_whole)
{
  char *env[] = {"TIERMALLOC_TOPTIER_MAX=16G", NULL};
  tm_options_init_from(env, false);
  cr_assert_eq(tm_option_size(TM_OPTION_TOPTIER_MAX, 0), 16ULL << 30);
  cr_assert_eq(tm_option_size(TM_OPTION_TOPTIER_MAX, 1000), 16ULL << 30);
  cr_assert_eq(tm_option_size(TM_OPTION_RESERVE, 12345), tm_option(TM_OPTION_RESERVE)->num);
}

Test(options, size_of_percent)
{
  static const struct { const char *pct; uint64_t whole, want; } cases[] = {
    {"100%", 64ULL << 30, 64ULL << 30},
    {"50%", 64ULL << 30, 32ULL << 30},
    {"33%", 1000, 330},
    {"33%", 1001, 330},            /* 330.33, rounded down */
    {"1%", 99, 0},
    {"0%", 1ULL << 40, 0},
    {"75%", 0, 0},
    {"100%", 1ULL << 63, 1ULL << 63},
    {"50%", 1ULL << 63, 1ULL << 62},
    {"99%", 1ULL << 63, 9131138316486228049ULL},   /* floor(2^63 * 99 / 100) */
    {"100%", UINT64_MAX, UINT64_MAX},
    {"37%", UINT64_MAX, 6825295307272534097ULL},   /* floor((2^64-1) * 37 / 100) */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char var[64];
    snprintf(var, sizeof var, "TIERMALLOC_TOPTIER_MAX=%s", cases[i].pct);
    char *env[] = {var, NULL};
    tm_options_init_from(env, false);
    uint64_t got = tm_option_size(TM_OPTION_TOPTIER_MAX, cases[i].whole);
    cr_assert_eq(got, cases[i].want, "%s of %llu: %llu, want %llu", cases[i].pct,
                 (unsigned long long)cases[i].whole, (unsigned long long)got,
                 (unsigned long long)cases[i].want);
  }
}

/* The default top-tier budget is the whole top tier. */
Test(options, size_default_percent)
{
  tm_options_init_from(NULL, false);
  cr_assert_eq(tm_option_size(TM_OPTION_TOPTIER_MAX, 12345), 12345);
}

/* ---- secure execution --------------------------------------------------------- */

/* name, split at '_', has the word w. */
static bool opt_name_has_word(const char *name, const char *w)
{
  size_t n = strlen(w);
  for (const char *p = name; p != NULL; p = strchr(p, '_') ? strchr(p, '_') + 1 : NULL)
    if (strncmp(p, w, n) == 0 && (p[n] == '\0' || p[n] == '_')) return true;
  return false;
}

/* Every option chose what secure execution does with it (zero is no choice),
 * and an option that names a file, a directory or another process, or that
 * prints, is dropped there. */
Test(options, every_option_is_marked_for_secure_execution)
{
  static const char *const reaches_out[] = {"FILE", "DIR", "PATH", "PID", "SOCKET", "STATS",
                                            "VERBOSE", "PUBLISH", "LOG", "DUMP"};
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) {
    const tm_option_desc_t *d = &tm_option_descs[i];
    cr_assert(d->secure == TM_OPT_SECURE_KEEP || d->secure == TM_OPT_SECURE_DROP,
              "%s: secure execution is neither KEEP nor DROP (%d)", d->name, (int)d->secure);
    for (size_t k = 0; k < sizeof reaches_out / sizeof reaches_out[0]; k++)
      if (opt_name_has_word(d->name, reaches_out[k]))
        cr_assert_eq(d->secure, TM_OPT_SECURE_DROP, "%s reaches outside the process: DROP it",
                     d->name);
  }
  cr_assert_eq(tm_option_descs[TM_OPTION_STATS_FILE].secure, TM_OPT_SECURE_DROP);
  cr_assert_eq(tm_option_descs[TM_OPTION_TOPTIER_MAX].secure, TM_OPT_SECURE_KEEP);
}

Test(options, secure_execution_keeps_memory_options_and_drops_output, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_STATS=text", "TIERMALLOC_STATS_FILE=/root/x", "TIERMALLOC_VERBOSE=1",
                 "TIERMALLOC_TOPTIER_MAX=64M", "TIERMALLOC_NARENAS=3", NULL};
  tm_options_init_from(env, true);
  cr_assert(tm_options_secure());
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++)
    if (tm_option_descs[i].secure == TM_OPT_SECURE_DROP) opt_is_default(i);
  cr_assert_eq(tm_option(TM_OPTION_TOPTIER_MAX)->num, 64 * KiB * KiB);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 3);
  cr_assert_stderr_eq_str("tiermalloc: secure execution (setuid, setgid or capabilities): ignoring "
                          "TIERMALLOC_STATS, TIERMALLOC_STATS_FILE, TIERMALLOC_VERBOSE\n");
}

/* A dropped option is not even parsed: a bad value of it says nothing more. */
Test(options, secure_execution_is_quiet_without_dropped_options, .init = cr_redirect_stderr)
{
  char *env[] = {"TIERMALLOC_NARENAS=2", NULL};
  tm_options_init_from(env, true);
  cr_assert_eq(tm_option(TM_OPTION_NARENAS)->num, 2);
  char *env2[] = {"TIERMALLOC_STATS=bogus", NULL};
  tm_options_init_from(env2, true);
  opt_is_default(TM_OPTION_STATS);
  tm_options_init_from(env2, false);
  cr_assert_not(tm_options_secure());
  cr_assert_stderr_eq_str("tiermalloc: secure execution (setuid, setgid or capabilities): ignoring "
                          "TIERMALLOC_STATS\n"
                          "tiermalloc: TIERMALLOC_STATS='bogus' is not one of none|text|json|prom; "
                          "using default (none)\n");
}

/* ---- env.example ------------------------------------------------------------ */

static const char *opt_type_word(const tm_option_desc_t *d)
{
  switch (d->type) {
  case TM_OPT_BOOL:   return "boolean";
  case TM_OPT_UINT:   return "number";
  case TM_OPT_SIZE:   return "size";
  case TM_OPT_SHARE:  return "size or %";
  case TM_OPT_PERCENT: return "percentage";
  case TM_OPT_ENUM:   return "one of ";
  case TM_OPT_STRING: return "string";
  }
  return "?";
}

/* Every "#TIERMALLOC_" line, in order, is the table's option with its
 * default, and the line before it is "# <doc> [<type>]", with
 * "; ignored in secure execution" inside the brackets for a dropped option. */
Test(options, env_example_matches_table)
{
  FILE *f = fopen("env.example", "r");
  cr_assert_not_null(f, "env.example: %s (run from the repository root)", strerror(errno));
  char line[1024], prev[1024] = "";
  unsigned next = 0;
  int lineno = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    lineno++;
    size_t n = strlen(line);
    cr_assert(n > 0 && line[n - 1] == '\n', "env.example:%d: too long or unterminated", lineno);
    line[n - 1] = '\0';
    cr_assert(strncmp(line, "TIERMALLOC_", 11) != 0 && strncmp(line, "export ", 7) != 0,
              "env.example:%d: a setting must stay commented out: %s", lineno, line);
    if (strncmp(line, "#TIERMALLOC_", 12) == 0) {
      cr_assert_lt(next, TM_OPTION_COUNT, "env.example:%d: more options than the table: %s",
                   lineno, line);
      const tm_option_desc_t *d = &tm_option_descs[next];
      char want[1024];
      snprintf(want, sizeof want, "#TIERMALLOC_%s=%s", d->name, d->def);
      cr_assert_str_eq(line, want, "env.example:%d: option %u", lineno, next);
      snprintf(want, sizeof want, "# %s [%s%s%s]", d->doc, opt_type_word(d),
               d->type == TM_OPT_ENUM ? d->choices : "",
               d->secure == TM_OPT_SECURE_DROP ? "; ignored in secure execution" : "");
      cr_assert_str_eq(prev, want, "env.example:%d: the comment for %s", lineno - 1, d->name);
      next++;
    }
    memcpy(prev, line, sizeof prev);
  }
  fclose(f);
  cr_assert_eq(next, TM_OPTION_COUNT, "env.example lists %u options, the table %d", next,
               TM_OPTION_COUNT);
}
