/* What every harness here shares: a failed check prints one line and aborts,
 * which libFuzzer reports as a finding with the input that caused it. */
#ifndef TM_FUZZ_H
#define TM_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...) do { fprintf(stderr, "FUZZ FAILURE: " __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

#endif
