#include "options.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "log.h"

/*
 * Everything here runs inside malloc's first call, possibly before the
 * program's constructors: no allocation (no strdup, no stdio), no locale
 * (no tolower/isspace), no strtoul (it takes signs, spaces and junk).
 */

extern char **environ;   /* unistd.h declares it only under _GNU_SOURCE */

#define OPT_PREFIX     "TIERMALLOC_"
#define OPT_PREFIX_LEN (sizeof OPT_PREFIX - 1)
#define OPT_MAX_VALUE  ((uint64_t)INT64_MAX)   /* UINT and SIZE: 0 .. 2^63-1 */

const tm_option_desc_t tm_option_descs[TM_OPTION_COUNT] = {
#define OPT_DESC_(id, type, def, choices, secure, doc) \
  [TM_OPTION_##id] = {#id, type, def, choices, secure, doc},
  TM_OPTIONS(OPT_DESC_)
#undef OPT_DESC_
};

/* TIERMALLOC_* variables that belong to other parts of tiermalloc and are
 * not options: the unknown-name check leaves them alone. None yet. */
static const char *const opt_not_options[] = {
  NULL,
};

/* The values in force. Filled with the parsed defaults on first use, so a
 * reader that runs before tm_options_init (an exit handler, say) sees the
 * defaults rather than zeros. */
static tm_option_value_t opt_values[TM_OPTION_COUNT];
static pthread_once_t opt_defaults_once = PTHREAD_ONCE_INIT;
static pthread_once_t opt_env_once = PTHREAD_ONCE_INIT;
static bool opt_secure;   /* the last load was in secure execution */

/* ---- text helpers ------------------------------------------------------------ */

static int opt_lower(int c)
{
  return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static bool opt_space(int c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* s[0..n) equals the NUL-terminated word, ignoring ASCII case. */
static bool opt_word_eq(const char *s, size_t n, const char *word)
{
  size_t i = 0;
  for (; i < n; i++)
    if (word[i] == '\0' || opt_lower((unsigned char)s[i]) != opt_lower((unsigned char)word[i]))
      return false;
  return word[i] == '\0';
}

/* Leading digits of s[0..n): their value in *v (saturated to UINT64_MAX when
 * it exceeds OPT_MAX_VALUE) and how many there were. */
static size_t opt_digits(const char *s, size_t n, uint64_t *v)
{
  uint64_t acc = 0;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    unsigned d = (unsigned)(s[i] - '0');
    if (acc > (OPT_MAX_VALUE - d) / 10) acc = UINT64_MAX;
    else acc = acc * 10 + d;
  }
  *v = acc;
  return i;
}

/* ---- one value per type ------------------------------------------------------ */

static int opt_parse_bool(const char *s, size_t n, uint64_t *v)
{
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (opt_word_eq(s, n, yes[i])) { *v = 1; return 0; }
    if (opt_word_eq(s, n, no[i])) { *v = 0; return 0; }
  }
  return EINVAL;
}

static int opt_parse_uint(const char *s, size_t n, uint64_t *v)
{
  size_t d = opt_digits(s, n, v);
  if (d == 0 || d != n) return EINVAL;
  return *v > OPT_MAX_VALUE ? ERANGE : 0;
}

/* Digits, then nothing (bytes), '%' (0..100), or one of K/M/G/T/P and
 * optionally B or iB; a bare B is bytes too. Syntax is checked before range,
 * so "99999999999999999999Q" is junk, not too large. */
static int opt_parse_size(const char *s, size_t n, uint64_t *v, bool *percent)
{
  static const char units[] = "kmgtp";
  uint64_t num;
  size_t i = opt_digits(s, n, &num);
  if (i == 0) return EINVAL;
  const char *rest = s + i;
  size_t rn = n - i;

  if (rn == 1 && rest[0] == '%') {
    if (num > 100) return EINVAL;
    *v = num;
    *percent = true;
    return 0;
  }

  unsigned shift = 0;
  if (rn > 0) {
    const char *u = memchr(units, opt_lower((unsigned char)rest[0]), sizeof units - 1);
    if (u != NULL) {
      shift = 10 * (unsigned)(u - units + 1);
      rest++;
      rn--;
    }
  }
  if (!(rn == 0 || opt_word_eq(rest, rn, "b") || (shift > 0 && opt_word_eq(rest, rn, "ib"))))
    return EINVAL;
  if (num > OPT_MAX_VALUE || num > (OPT_MAX_VALUE >> shift)) return ERANGE;
  *v = num << shift;
  *percent = false;
  return 0;
}

static int opt_parse_enum(const char *s, size_t n, const char *choices, uint64_t *v)
{
  uint64_t index = 0;
  for (const char *c = choices; c != NULL && *c != '\0'; index++) {
    const char *bar = strchr(c, '|');
    size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n) {
      size_t k = 0;
      while (k < n && opt_lower((unsigned char)s[k]) == opt_lower((unsigned char)c[k])) k++;
      if (k == n) { *v = index; return 0; }
    }
    if (bar == NULL) break;
    c = bar + 1;
  }
  return EINVAL;
}

int tm_option_parse(tm_option_id_t id, const char *text, tm_option_value_t *out)
{
  if ((unsigned)id >= TM_OPTION_COUNT || text == NULL) return EINVAL;
  const tm_option_desc_t *d = &tm_option_descs[id];

  /* Surrounding white space never matters, for any type. */
  size_t n = strlen(text);
  while (n > 0 && opt_space((unsigned char)*text)) { text++; n--; }
  while (n > 0 && opt_space((unsigned char)text[n - 1])) n--;

  /* Zeroed whole, so equal values compare equal byte for byte. */
  tm_option_value_t v;
  memset(&v, 0, sizeof v);
  int err = EINVAL;
  switch (d->type) {
  case TM_OPT_BOOL:   err = opt_parse_bool(text, n, &v.num); break;
  case TM_OPT_UINT:   err = opt_parse_uint(text, n, &v.num); break;
  case TM_OPT_SIZE:
    err = opt_parse_size(text, n, &v.num, &v.percent);
    if (err == 0 && v.percent) err = EINVAL;   /* no whole to take it of */
    break;
  case TM_OPT_SHARE:  err = opt_parse_size(text, n, &v.num, &v.percent); break;
  case TM_OPT_PERCENT:
    err = opt_parse_size(text, n, &v.num, &v.percent);
    if (err == ERANGE || (err == 0 && !v.percent)) err = EINVAL;   /* a size is no share */
    break;
  case TM_OPT_ENUM:   err = opt_parse_enum(text, n, d->choices, &v.num); break;
  case TM_OPT_STRING:
    if (n > TM_OPT_STRING_MAX - 1) {
      err = ERANGE;
    } else {
      memcpy(v.str, text, n);
      v.str[n] = '\0';
      err = 0;
    }
    break;
  }
  if (err == 0) *out = v;
  return err;
}

/* ---- loading ----------------------------------------------------------------- */

/* s[0..n) fit for one warning line: control bytes become '?', and a long
 * value is cut short with "...". */
static const char *opt_quote(const char *s, size_t n, char *buf, size_t size)
{
  size_t i = 0;
  for (; i < n && i < size - 4; i++) {
    unsigned char c = (unsigned char)s[i];
    buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
  if (i < n) { memcpy(buf + i, "...", 3); i += 3; }
  buf[i] = '\0';
  return buf;
}

_Static_assert(TM_OPT_STRING_MAX == 256, "opt_warn_bad says 255 bytes");

static void opt_warn_bad(tm_option_id_t id, const char *text, int err)
{
  const tm_option_desc_t *d = &tm_option_descs[id];
  const char *what = "is too large", *detail = "";
  if (err == ERANGE) {
    if (d->type == TM_OPT_STRING) what = "is longer than 255 bytes";
  } else {
    switch (d->type) {
    case TM_OPT_BOOL:   what = "is not a boolean"; break;
    case TM_OPT_UINT:   what = "is not a number"; break;
    case TM_OPT_SIZE:   what = "is not a size"; break;
    case TM_OPT_SHARE:  what = "is not a size or a percentage"; break;
    case TM_OPT_PERCENT: what = "is not a percentage (N%)"; break;
    case TM_OPT_ENUM:   what = "is not one of "; detail = d->choices; break;
    case TM_OPT_STRING: what = "is not a string"; break;   /* parse never says so */
    }
  }
  char quoted[64];
  tm_warn(OPT_PREFIX "%s='%s' %s%s; using default (%s)", d->name,
          opt_quote(text, strlen(text), quoted, sizeof quoted), what, detail, d->def);
}

/* The value of TIERMALLOC_<name>: from getenv when env is NULL, else the
 * first "TIERMALLOC_<name>=" entry of env. NULL when absent. */
static const char *opt_lookup(char *const *env, const char *name)
{
  char var[64];
  size_t n = strlen(name);
  if (OPT_PREFIX_LEN + n + 1 > sizeof var) return NULL;
  memcpy(var, OPT_PREFIX, OPT_PREFIX_LEN);
  memcpy(var + OPT_PREFIX_LEN, name, n + 1);
  if (env == NULL) return getenv(var);
  size_t vn = OPT_PREFIX_LEN + n;
  for (; *env != NULL; env++)
    if (strncmp(*env, var, vn) == 0 && (*env)[vn] == '=') return *env + vn + 1;
  return NULL;
}

/* One warning for each TIERMALLOC_* entry of env that is neither an option
 * nor one of opt_not_options. */
static void opt_check_unknown(char *const *env)
{
  for (; env != NULL && *env != NULL; env++) {
    const char *e = *env;
    if (strncmp(e, OPT_PREFIX, OPT_PREFIX_LEN) != 0) continue;
    const char *name = e + OPT_PREFIX_LEN;
    const char *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    bool known = false;
    for (unsigned i = 0; i < TM_OPTION_COUNT && !known; i++)
      known = strncmp(tm_option_descs[i].name, name, n) == 0 && tm_option_descs[i].name[n] == '\0';
    for (unsigned i = 0; opt_not_options[i] != NULL && !known; i++)
      known = strncmp(opt_not_options[i], name, n) == 0 && opt_not_options[i][n] == '\0';
    if (known) continue;
    char quoted[64];
    tm_warn("unknown option " OPT_PREFIX "%s ignored", opt_quote(name, n, quoted, sizeof quoted));
  }
}

static void opt_reset(void)
{
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) {
    /* A default that does not parse is a bug in the table (the unit tests
     * parse every one); zero is the least surprising stand-in. */
    if (tm_option_parse((tm_option_id_t)i, tm_option_descs[i].def, &opt_values[i]) != 0)
      memset(&opt_values[i], 0, sizeof opt_values[i]);
  }
}

static void opt_defaults(void)
{
  pthread_once(&opt_defaults_once, opt_reset);
}

/* In secure execution, one line naming every TM_OPT_SECURE_DROP option
 * that env sets, so the user learns why it had no effect. */
static void opt_warn_dropped(char *const *env)
{
  char names[TM_OPTION_COUNT * 40];
  size_t n = 0;
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) {
    const tm_option_desc_t *d = &tm_option_descs[i];
    if (d->secure != TM_OPT_SECURE_DROP || opt_lookup(env, d->name) == NULL) continue;
    size_t len = strlen(d->name);
    if (n + 2 + OPT_PREFIX_LEN + len + 1 > sizeof names) break;
    if (n > 0) { memcpy(names + n, ", ", 2); n += 2; }
    memcpy(names + n, OPT_PREFIX, OPT_PREFIX_LEN);
    memcpy(names + n + OPT_PREFIX_LEN, d->name, len);
    n += OPT_PREFIX_LEN + len;
  }
  names[n] = '\0';
  if (n > 0) tm_warn("secure execution (setuid, setgid or capabilities): ignoring %s", names);
}

/* Defaults, then every variable present in env (the process environment
 * when NULL): a good value replaces the default, a bad one is reported.
 * In secure execution the TM_OPT_SECURE_DROP options are not even parsed. */
static void opt_load(char *const *env, bool secure)
{
  opt_defaults();   /* spends the once, so no later tm_option() resets what follows */
  opt_reset();
  opt_secure = secure;
  for (unsigned i = 0; i < TM_OPTION_COUNT; i++) {
    if (secure && tm_option_descs[i].secure != TM_OPT_SECURE_KEEP) continue;
    const char *text = opt_lookup(env, tm_option_descs[i].name);
    /* VAR= is how shells and env files unset a variable: the default, quietly
     * (a STRING option takes the empty text as its value). */
    if (text == NULL || (text[0] == '\0' && tm_option_descs[i].type != TM_OPT_STRING)) continue;
    tm_option_value_t v;
    int err = tm_option_parse((tm_option_id_t)i, text, &v);
    if (err != 0) {
      opt_warn_bad((tm_option_id_t)i, text, err);
      continue;
    }
    v.set = true;
    opt_values[i] = v;
  }
  if (secure) opt_warn_dropped(env);
  opt_check_unknown(env != NULL ? env : environ);
}

static void opt_load_environ(void)
{
  /* The kernel's word, not the environment's: AT_SECURE is set for setuid,
   * setgid and file-capability programs, as glibc's own tunables use it. */
  opt_load(NULL, getauxval(AT_SECURE) != 0);
}

void tm_options_init(void)
{
  pthread_once(&opt_env_once, opt_load_environ);
}

void tm_options_init_from(char *const *env, bool secure)
{
  static char *const none[] = {NULL};
  opt_load(env != NULL ? env : none, secure);
}

bool tm_options_secure(void)
{
  return opt_secure;
}

const tm_option_value_t *tm_option(tm_option_id_t id)
{
  opt_defaults();
  return &opt_values[id];
}

uint64_t tm_option_size(tm_option_id_t id, uint64_t whole)
{
  const tm_option_value_t *v = tm_option(id);
  if (!v->percent) return v->num;
  /* whole*N/100 exactly, split so that no product exceeds whole. */
  return whole / 100 * v->num + whole % 100 * v->num / 100;
}
