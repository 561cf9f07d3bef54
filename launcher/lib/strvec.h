/* Growable NULL-terminated vectors of owned strings (argv, envp). */
#ifndef HVD_STRVEC_H
#define HVD_STRVEC_H

#include <stddef.h>

struct hvd_strvec {
    char **v; /* always NULL-terminated once anything was pushed */
    size_t n;
    size_t cap;
};

void hvd_strvec_init(struct hvd_strvec *sv);
void hvd_strvec_close(struct hvd_strvec *sv);
int hvd_strvec_push(struct hvd_strvec *sv, const char *s);
int hvd_strvec_pushn(struct hvd_strvec *sv, const char *s, size_t len);
int hvd_strvec_pushf(struct hvd_strvec *sv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets "NAME=value" entries: replaces one with the same NAME or appends. */
int hvd_strvec_setenv(struct hvd_strvec *sv, const char *entry);
/* Value of NAME in an environment vector, or NULL. */
const char *hvd_strvec_getenv(const struct hvd_strvec *sv, const char *name);

#endif
