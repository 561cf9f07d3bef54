/* What a test rank counts of its own process (tests/runtime). */
#ifndef HVD_TEST_PROCCOUNT_H
#define HVD_TEST_PROCCOUNT_H

#include <dirent.h>
#include <string.h>

/* Entries of a /proc/self directory (descriptors or threads), not
 * counting the descriptor that reading it takes. */
static inline int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - (strcmp(dir, "/proc/self/fd") == 0);
}

#endif
