/* Parses rank lists ("0,4-7") into one flag per rank. */
#include "launcher/lib/ranklist.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank: decimal digits only, below 10^7. */
static int number(const char **p, long *out)
{
    char *end;
    if (!isdigit((unsigned char)**p))
        return -1;
    errno = 0;
    *out = strtol(*p, &end, 10);
    if (errno || *out > 9999999)
        return -1;
    *p = end;
    return 0;
}

int hr_ranklist_parse(const char *list, int size, unsigned char *show,
                      char *err, size_t errlen)
{
    const char *p = list;
    if (show)
        memset(show, 0, (size_t)(size > 0 ? size : 0));
    for (;;) {
        long a, b;
        if (number(&p, &a) != 0)
            goto bad;
        b = a;
        if (*p == '-') {
            p++;
            if (number(&p, &b) != 0 || b < a)
                goto bad;
        }
        if (*p != ',' && *p != '\0')
            goto bad;
        if (size > 0 && b >= size) {
            snprintf(err, errlen,
                     "--output-ranks: rank %ld is not in the job (ranks 0-%d)",
                     b, size - 1);
            return -1;
        }
        for (long r = a; show && r <= b; r++)
            show[r] = 1;
        if (*p == '\0')
            return 0;
        p++;
    }
bad:
    snprintf(err, errlen,
             "--output-ranks must be ranks and ranges such as 0 or 0,4-7, "
             "got '%.100s'",
             list);
    return -1;
}
