/* Unit tests for the error table (common/err.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "common/hvd_err.h"

Test(err, every_code_has_a_name_and_message)
{
#define XX(name, val, msg)                                                     \
    cr_expect_str_eq(hvd_err_name(val), "HVD_" #name);                         \
    cr_expect_str_eq(hvd_strerror(val), msg);                                  \
    cr_expect_lt(val, 0);
    HVD_ERRNO_MAP(XX)
#undef XX
}

Test(err, unknown_and_success)
{
    cr_expect_str_eq(hvd_strerror(0), "success");
    cr_expect_str_eq(hvd_err_name(0), "HVD_OK");
    cr_expect_str_eq(hvd_strerror(-9999), "unknown error");
    cr_expect_str_eq(hvd_err_name(12345), "HVD_EUNKNOWN");
}
