/* Unit tests for launcher/lib/ranklist.c: --output-ranks lists. */
#include <criterion/criterion.h>

#include <string.h>

#include "launcher/lib/ranklist.h"

static char err[256];

Test(ranklist, ranks_and_ranges)
{
    unsigned char show[8];
    cr_assert_eq(hr_ranklist_parse("0,4-6", 8, show, err, sizeof(err)), 0);
    const unsigned char want[8] = {1, 0, 0, 0, 1, 1, 1, 0};
    cr_expect_eq(memcmp(show, want, 8), 0);
    cr_assert_eq(hr_ranklist_parse("7", 8, show, err, sizeof(err)), 0);
    cr_expect_eq(show[7], 1);
    cr_expect_eq(show[0], 0, "an earlier list is forgotten");
    cr_assert_eq(hr_ranklist_parse("2-2,1", 8, show, err, sizeof(err)), 0);
    cr_expect(show[1] && show[2] && !show[3]);
}

Test(ranklist, syntax_alone)
{
    cr_expect_eq(hr_ranklist_parse("0,4-7", 0, NULL, err, sizeof(err)), 0);
    cr_expect_eq(hr_ranklist_parse("999", 0, NULL, err, sizeof(err)), 0);
}

Test(ranklist, bad_lists)
{
    static const char *bad[] = {"",     ",",     "1,",  ",1",      "a",
                                "1-",   "-1",    "3-1", "1 ",      " 1",
                                "1,,2", "1-2-3", "+1",  "99999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        cr_expect_eq(hr_ranklist_parse(bad[i], 0, NULL, err, sizeof(err)), -1,
                     "'%s'", bad[i]);
        cr_expect_not_null(strstr(err, "--output-ranks"), "'%s': %s", bad[i],
                           err);
    }
}

Test(ranklist, rank_outside_the_job)
{
    unsigned char show[4];
    cr_assert_eq(hr_ranklist_parse("1,2-4", 4, show, err, sizeof(err)), -1);
    cr_expect_str_eq(err,
                     "--output-ranks: rank 4 is not in the job (ranks 0-3)");
}
