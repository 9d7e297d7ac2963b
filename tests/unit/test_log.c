/* log: one line per warning, and no repeats from run-time re-reads. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "log.h"

Test(log, repeats_are_quiet_only_while_asked, .init = cr_redirect_stderr)
{
  tm_warn("cannot use %s", "x");
  tm_log_quiet_repeats(true);
  tm_warn("cannot use %s", "x");   /* said before: quiet */
  tm_warn("cannot use %s", "y");   /* new: said */
  tm_log_quiet_repeats(false);
  tm_warn("cannot use %s", "x");   /* a start-up reader says it again */
  cr_assert_stderr_eq_str("tiermalloc: cannot use x\ntiermalloc: cannot use y\n"
                          "tiermalloc: cannot use x\n");
}
