/* Prints a line after hvd_init and then sleeps: the line must reach
 * horovodrun before the sleep ends, because hvd_init makes stdout
 * line-buffered (a pipe would otherwise hold it until exit). */
#include <stdio.h>
#include <unistd.h>

#include "hvd.h"

int main(void)
{
    if (hvd_init() != 0) {
        fprintf(stderr, "linebuf: %s\n", hvd_last_error());
        return 2;
    }
    printf("linebuf: rank %d before the sleep\n", hvd_rank());
    sleep(5);
    hvd_shutdown();
    return 0;
}
