/* Compile-time proof that the installed header's error table (hvd.h) and
 * the one libhvd and horovodrun work with (common/hvd_err.h) agree. */
#include "common/hvd_err.h"
#include "hvd.h"

/*
 * Whichever header came first declared the enum; every entry of each table
 * must name one of its codes with the entry's value, and the tables have
 * as many entries, so they hold the same names with the same values.
 */
#define SAME_VALUE(name, val, msg)                                             \
    _Static_assert(HVD_##name == (val),                                        \
                   "HVD_" #name ": hvd.h and common/hvd_err.h differ");
HVD_ERRNO_MAP(SAME_VALUE)
HVD_ERR_MAP(SAME_VALUE)
#undef SAME_VALUE

#define ONE(name, val, msg) +1
_Static_assert(0 HVD_ERRNO_MAP(ONE) == 0 HVD_ERR_MAP(ONE),
               "hvd.h and common/hvd_err.h list different numbers of codes");
#undef ONE

/* C11 cannot compare strings at compile time; their lengths catch most
 * edits, and the unit test compares the texts (tests/unit/test_err.c). */
#define LEN(name, val, msg) ERRLEN_##name = sizeof(msg),
enum { HVD_ERR_MAP(LEN) };
#undef LEN
#define SAME_LEN(name, val, msg)                                               \
    _Static_assert(ERRLEN_##name == sizeof(msg),                               \
                   "HVD_" #name "'s message: hvd.h and common/hvd_err.h "      \
                   "differ");
HVD_ERRNO_MAP(SAME_LEN)
#undef SAME_LEN
