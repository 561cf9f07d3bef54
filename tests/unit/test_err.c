/* Unit tests for the error tables: libhvd's (common/err.c, and its public
 * copy in worker/include/hvd.h) and the launcher's (launcher/lib/errcode.c). */
#include <criterion/criterion.h>
#include <limits.h>
#include <string.h>

#include "launcher/lib/errcode.h"
/* The tables below are the public header's, so that messages_are_specific
 * checks hvd_strerror's messages (common/hvd_err.h) against its own. */
#include "worker/include/hvd.h"

struct code {
    const char *name; /* as the table spells it, e.g. "EINVAL" */
    int val;
    const char *msg;
};

/* Both tables, libhvd's first: they share one number space. */
#define XX(name, val, msg) {#name, val, msg},
static const struct code table[] = {HVD_ERRNO_MAP(XX) HR_ERRNO_MAP(XX)};
static const struct code public_table[] = {HVD_ERRNO_MAP(XX)};
#undef XX
#define NCODES (sizeof(table) / sizeof(table[0]))
#define NPUBLIC (sizeof(public_table) / sizeof(public_table[0]))

/* Numbers no code may take again: an old program would misread them. */
static const int retired[] = {-12};
#define NRETIRED (sizeof(retired) / sizeof(retired[0]))

static int in_public(int val)
{
    for (size_t i = 0; i < NPUBLIC; i++)
        if (public_table[i].val == val)
            return 1;
    return 0;
}

/*
 * The values are ABI: programs and ctypes front ends compare against the
 * numbers, so a code may be added at the end but never renumbered. This
 * list is written out by hand so that a renumbering fails here.
 */
static const struct {
    int code;
    int val;
} pinned[] = {
    {HVD_EINVAL, -1},      {HVD_ENOMEM, -2},     {HVD_EIO, -3},
    {HVD_ERANGE, -4},      {HVD_EPARSE, -5},     {HVD_EDUP, -6},
    {HVD_ETOOBIG, -7},     {HVD_EPROTO, -8},     {HVD_ETRUNC, -9},
    {HVD_ENOSLOTS, -10},   {HVD_ESYS, -11},      {HVD_ENOTINIT, -13},
    {HVD_EINIT, -14},      {HVD_ETIMEDOUT, -15}, {HVD_EPEER, -16},
    {HVD_EAUTH, -17},      {HVD_ECONNECT, -18},  {HVD_EENV, -19},
    {HVD_ESHUTDOWN, -20},  {HVD_ENOTSUP, -21},   {HVD_EMISMATCH, -22},
    {HVD_ENOTMEMBER, -23},
};

Test(err, values_are_pinned)
{
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++)
        cr_expect_eq(pinned[i].code, pinned[i].val, "%s is %d, was %d",
                     hr_err_name(pinned[i].code), pinned[i].code,
                     pinned[i].val);
    /* Every code in the table is pinned: a new one must be added above. */
    cr_expect_eq(NCODES, sizeof(pinned) / sizeof(pinned[0]));
}

Test(err, values_are_negative_and_distinct)
{
    for (size_t i = 0; i < NCODES; i++) {
        cr_expect_lt(table[i].val, 0, "%s", table[i].name);
        for (size_t j = i + 1; j < NCODES; j++)
            cr_expect_neq(table[i].val, table[j].val, "%s and %s share %d",
                          table[i].name, table[j].name, table[i].val);
    }
}

/* New codes take the next number: every number down to the lowest code
 * is a code of one table or retired, so no gap is left that a later code
 * could fill with a meaning an old program does not expect. */
Test(err, values_are_dense)
{
    int lowest = 0;
    for (size_t i = 0; i < NCODES; i++)
        lowest = table[i].val < lowest ? table[i].val : lowest;
    for (int v = -1; v >= lowest; v--) {
        int n = 0;
        for (size_t i = 0; i < NCODES; i++)
            n += table[i].val == v;
        for (size_t i = 0; i < NRETIRED; i++)
            n += retired[i] == v;
        cr_expect_eq(n, 1, "%d is used %d times", v, n);
    }
}

/* libhvd's table holds only what libhvd returns: the parse and plan codes
 * are the launcher's, and libhvd's own functions do not know them. */
Test(err, launcher_codes_are_not_public)
{
    static const int launcher_only[] = {HVD_EIO, HVD_ERANGE, HVD_EPARSE,
                                        HVD_EDUP, HVD_ENOSLOTS};
    for (size_t i = 0; i < sizeof(launcher_only) / sizeof(int); i++) {
        cr_expect(!in_public(launcher_only[i]), "%d", launcher_only[i]);
        cr_expect_str_eq(hvd_err_name(launcher_only[i]), "HVD_EUNKNOWN");
        cr_expect_str_neq(hr_err_name(launcher_only[i]), "HVD_EUNKNOWN");
    }
    cr_expect(in_public(HVD_EPEER));
    cr_expect_str_eq(hr_err_name(HVD_EPEER), "HVD_EPEER");
    cr_expect_str_eq(hr_err_str(HVD_EPEER), hvd_strerror(HVD_EPEER));
}

Test(err, names_follow_the_convention)
{
    for (size_t i = 0; i < NCODES; i++) {
        const char *n = hr_err_name(table[i].val);
        cr_assert_not_null(n);
        cr_expect_eq(strncmp(n, "HVD_E", 5), 0, "%s", n);
        cr_expect_str_eq(n + 4, table[i].name);
        cr_expect_gt(strlen(n), 5, "%s", n);
        for (const char *c = n + 4; *c; c++)
            cr_expect((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'),
                      "%s: '%c'", n, *c);
        cr_expect_str_neq(n, "HVD_EUNKNOWN");
        cr_expect_str_neq(n, "HVD_OK");
        for (size_t j = i + 1; j < NCODES; j++)
            cr_expect_str_neq(n, hr_err_name(table[j].val));
    }
}

/* Messages are composed into one-line errors ("cannot connect to X: %s"):
 * lower case, no full stop, no newline, and each says something its own. */
Test(err, messages_are_specific)
{
    for (size_t i = 0; i < NCODES; i++) {
        const char *m = hr_err_str(table[i].val);
        size_t len = strlen(m);
        cr_assert_gt(len, 0, "%s", table[i].name);
        cr_expect_str_eq(m, table[i].msg);
        cr_expect_str_neq(m, "unknown error", "%s", table[i].name);
        cr_expect_str_neq(m, "success", "%s", table[i].name);
        cr_expect_null(strchr(m, '\n'), "%s", table[i].name);
        cr_expect_neq(m[len - 1], '.', "%s", table[i].name);
        cr_expect(!(m[0] >= 'A' && m[0] <= 'Z'), "%s: %s", table[i].name, m);
        for (size_t j = i + 1; j < NCODES; j++)
            cr_expect_str_neq(m, hr_err_str(table[j].val), "%s and %s",
                              table[i].name, table[j].name);
    }
}

Test(err, success)
{
    cr_expect_str_eq(hvd_strerror(0), "success");
    cr_expect_str_eq(hvd_err_name(0), "HVD_OK");
    cr_expect_str_eq(hr_err_str(0), "success");
    cr_expect_str_eq(hr_err_name(0), "HVD_OK");
}

Test(err, unknown_codes)
{
    const int unknown[] = {
        -(int)(NCODES + NRETIRED) - 1, -12, 1, 12345, -9999, INT_MIN, INT_MAX,
    };
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        cr_expect_str_eq(hr_err_str(unknown[i]), "unknown error", "%d",
                         unknown[i]);
        cr_expect_str_eq(hr_err_name(unknown[i]), "HVD_EUNKNOWN", "%d",
                         unknown[i]);
    }
}
