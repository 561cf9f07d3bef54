/* Fuzz target: --mpi-args split like a shell, and words quoted back. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "launcher/lib/errcode.h"
#include "launcher/horovodrun/mpicmd.h"

/*
 * Input layout: byte 0 picks the mode, the rest is the text. Mode even:
 * the text (up to its first NUL) is an --mpi-args value to split. Mode
 * odd: the text is a list of words separated by NUL bytes to join.
 * Either way the words must survive hr_shell_join and hr_shell_split.
 */
#define PARAMS 1

/* join(words) splits back into the same words. */
static void check_round_trip(const struct hvd_strvec *words)
{
    static char *const none[] = {NULL};
    struct hvd_strvec back;
    char err[256];

    char *s = hr_shell_join(words->n ? words->v : none);
    FUZZ_CHECK(s != NULL);
    hvd_strvec_init(&back);
    FUZZ_CHECK(hr_shell_split(s, &back, err, sizeof(err)) == 0);
    FUZZ_CHECK(back.n == words->n);
    for (size_t i = 0; i < back.n; i++)
        FUZZ_CHECK(strcmp(back.v[i], words->v[i]) == 0);
    hvd_strvec_close(&back);
    free(s);
}

static void fuzz_split(const char *text)
{
    struct hvd_strvec words;
    char err[64];

    hvd_strvec_init(&words);
    memset(err, 'x', sizeof(err));
    int rc = hr_shell_split(text, &words, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == HVD_EPARSE);
    if (rc == HVD_EPARSE) {
        /* A message, cut to the buffer, naming the option. */
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(strncmp(err, "--mpi-args", 10) == 0);
    } else {
        /* Splitting only takes bytes away: words never outnumber or
         * outgrow the text. */
        FUZZ_CHECK(words.n <= strlen(text));
        for (size_t i = 0; i < words.n; i++)
            FUZZ_CHECK(strlen(words.v[i]) <= strlen(text));
        check_round_trip(&words);
    }
    hvd_strvec_close(&words);
}

static void fuzz_join(const char *p, size_t len)
{
    struct hvd_strvec words;
    size_t start = 0;

    hvd_strvec_init(&words);
    for (size_t i = 0; i <= len; i++)
        if (i == len || p[i] == '\0') {
            FUZZ_CHECK(hvd_strvec_pushn(&words, p + start, i - start) == 0);
            start = i + 1;
        }
    check_round_trip(&words);
    hvd_strvec_close(&words);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PARAMS)
        return 0;
    size_t len = size - PARAMS;
    char *text = malloc(len + 1);
    FUZZ_CHECK(text != NULL);
    if (len > 0)
        memcpy(text, data + PARAMS, len);
    text[len] = '\0';
    if (data[0] % 2 == 0)
        fuzz_split(text);
    else
        fuzz_join(text, len);
    free(text);
    return 0;
}
