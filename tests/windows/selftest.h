/* selftest.h - the client self-test (selftest.c), shared by gsb.exe and the
 * native Linux build it is compared with. */
#ifndef GSB_TESTS_WINDOWS_SELFTEST_H
#define GSB_TESTS_WINDOWS_SELFTEST_H

#include <stdio.h>

/* Fit, predict, save and load against the gsbd at url, printing every number
 * to out; 0 when all of it worked. */
int gsb_selftest(const char *url, FILE *out);

#endif
