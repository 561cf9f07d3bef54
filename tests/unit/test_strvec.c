/* Unit tests for owned string vectors and env entries (lib/strvec.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/lib/strvec.h"

Test(strvec, init_is_empty)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_null(sv.v);
    cr_assert_eq(sv.n, 0);
    cr_assert_eq(sv.cap, 0);
    hvd_strvec_close(&sv);
}

Test(strvec, close_null_and_twice)
{
    struct hvd_strvec sv;

    hvd_strvec_close(NULL);
    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_push(&sv, "a"), 0);
    hvd_strvec_close(&sv);
    cr_assert_null(sv.v);
    cr_assert_eq(sv.n, 0);
    /* A closed vector is empty and may be closed or reused again. */
    hvd_strvec_close(&sv);
    cr_assert_eq(hvd_strvec_push(&sv, "b"), 0);
    cr_assert_str_eq(sv.v[0], "b");
    hvd_strvec_close(&sv);
}

Test(strvec, push_copies_and_terminates)
{
    struct hvd_strvec sv;
    char word[] = "hello";

    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_push(&sv, word), 0);
    word[0] = 'J';
    cr_assert_eq(sv.n, 1);
    cr_assert_str_eq(sv.v[0], "hello");
    cr_assert_null(sv.v[1]);
    cr_assert_neq(sv.v[0], word);
    hvd_strvec_close(&sv);
}

Test(strvec, push_many_keeps_order_and_null)
{
    struct hvd_strvec sv;
    char want[32];
    size_t i;

    hvd_strvec_init(&sv);
    for (i = 0; i < 1000; i++)
        cr_assert_eq(hvd_strvec_pushf(&sv, "arg%zu", i), 0);
    cr_assert_eq(sv.n, 1000);
    cr_assert_geq(sv.cap, 1001);
    for (i = 0; i < 1000; i++) {
        snprintf(want, sizeof(want), "arg%zu", i);
        cr_assert_str_eq(sv.v[i], want);
    }
    cr_assert_null(sv.v[1000]);
    hvd_strvec_close(&sv);
}

Test(strvec, pushn_takes_prefix)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_pushn(&sv, "abcdef", 3), 0);
    cr_assert_eq(hvd_strvec_pushn(&sv, "xyz", 0), 0);
    /* Like strndup, a NUL inside the first len bytes ends the copy. */
    cr_assert_eq(hvd_strvec_pushn(&sv, "ab\0cd", 5), 0);
    cr_assert_eq(sv.n, 3);
    cr_assert_str_eq(sv.v[0], "abc");
    cr_assert_str_eq(sv.v[1], "");
    cr_assert_str_eq(sv.v[2], "ab");
    cr_assert_null(sv.v[3]);
    hvd_strvec_close(&sv);
}

Test(strvec, pushf_formats_long_strings)
{
    struct hvd_strvec sv;
    char big[5000];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_pushf(&sv, "%s=%d", "HOROVOD_RANK", 7), 0);
    cr_assert_eq(hvd_strvec_pushf(&sv, "<%s>", big), 0);
    cr_assert_eq(hvd_strvec_pushf(&sv, "%s", ""), 0);
    cr_assert_str_eq(sv.v[0], "HOROVOD_RANK=7");
    cr_assert_eq(strlen(sv.v[1]), 5001);
    cr_assert_eq(sv.v[1][0], '<');
    cr_assert_eq(sv.v[1][5000], '>');
    cr_assert_str_eq(sv.v[2], "");
    hvd_strvec_close(&sv);
}

Test(strvec, bad_arguments)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_push(NULL, "a"), HVD_EINVAL);
    cr_assert_eq(hvd_strvec_push(&sv, NULL), HVD_EINVAL);
    cr_assert_eq(hvd_strvec_pushn(&sv, NULL, 3), HVD_EINVAL);
    cr_assert_eq(hvd_strvec_setenv(&sv, NULL), HVD_EINVAL);
    cr_assert_eq(hvd_strvec_setenv(&sv, "NOEQUALS"), HVD_EINVAL);
    cr_assert_eq(hvd_strvec_setenv(&sv, "=value"), HVD_EINVAL);
    cr_assert_eq(sv.n, 0);
    cr_assert_null(hvd_strvec_getenv(NULL, "A"));
    cr_assert_null(hvd_strvec_getenv(&sv, NULL));
    hvd_strvec_close(&sv);
}

Test(strvec, setenv_appends_then_replaces)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_setenv(&sv, "A=1"), 0);
    cr_assert_eq(hvd_strvec_setenv(&sv, "AB=2"), 0);
    cr_assert_eq(hvd_strvec_setenv(&sv, "B=3"), 0);
    cr_assert_eq(sv.n, 3);
    /* Replacing keeps the position; "A" must not match "AB". */
    cr_assert_eq(hvd_strvec_setenv(&sv, "A=one"), 0);
    cr_assert_eq(sv.n, 3);
    cr_assert_str_eq(sv.v[0], "A=one");
    cr_assert_str_eq(sv.v[1], "AB=2");
    cr_assert_str_eq(sv.v[2], "B=3");
    cr_assert_eq(hvd_strvec_setenv(&sv, "AB="), 0);
    cr_assert_str_eq(sv.v[1], "AB=");
    cr_assert_null(sv.v[3]);
    hvd_strvec_close(&sv);
}

Test(strvec, setenv_value_may_hold_equals)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_eq(hvd_strvec_setenv(&sv, "OPTS=a=b=c"), 0);
    cr_assert_str_eq(hvd_strvec_getenv(&sv, "OPTS"), "a=b=c");
    cr_assert_eq(hvd_strvec_setenv(&sv, "OPTS=x=y"), 0);
    cr_assert_eq(sv.n, 1);
    cr_assert_str_eq(hvd_strvec_getenv(&sv, "OPTS"), "x=y");
    hvd_strvec_close(&sv);
}

Test(strvec, getenv_finds_exact_names)
{
    struct hvd_strvec sv;

    hvd_strvec_init(&sv);
    cr_assert_null(hvd_strvec_getenv(&sv, "PATH"));
    cr_assert_eq(hvd_strvec_push(&sv, "PATHX=no"), 0);
    cr_assert_eq(hvd_strvec_push(&sv, "NOVALUE"), 0);
    cr_assert_eq(hvd_strvec_push(&sv, "PATH=/bin"), 0);
    cr_assert_eq(hvd_strvec_push(&sv, "EMPTY="), 0);
    cr_assert_str_eq(hvd_strvec_getenv(&sv, "PATH"), "/bin");
    cr_assert_str_eq(hvd_strvec_getenv(&sv, "EMPTY"), "");
    cr_assert_null(hvd_strvec_getenv(&sv, "PAT"));
    cr_assert_null(hvd_strvec_getenv(&sv, "NOVALUE"));
    cr_assert_null(hvd_strvec_getenv(&sv, ""));
    cr_assert_null(hvd_strvec_getenv(&sv, "PATH=/bin"));
    /* The returned pointer is the value inside the stored entry. */
    cr_assert_eq(hvd_strvec_getenv(&sv, "PATH"), sv.v[2] + 5);
    hvd_strvec_close(&sv);
}
