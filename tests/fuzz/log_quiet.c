/* Stand-in for allocator/log.c: formats the warning (so format/argument bugs
 * are still exercised under ASan/UBSan) but writes nothing. */
#include <stdarg.h>
#include <stdio.h>
#include "log.h"
void tm_warn(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
}
