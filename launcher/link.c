/* Dispatch from the job controller to the local (or srun) or SSH link. */
#include <signal.h>

#include "job.h"
#include "link.h"
#include "link_local.h"
#include "ssh.h"

int hr_link_start(struct hr_agent *a)
{
    if (a->ssh)
        return hr_ssh_link_start(a);
    return hr_local_link_start(a, a->argv.n ? a->argv.v : NULL);
}

void hr_link_send(struct hr_agent *a, uint8_t *frame, size_t len, int notify)
{
    if (a->ssh)
        hr_ssh_link_send(a, frame, len, notify);
    else
        hr_local_link_send(a, frame, len, notify);
}

void hr_link_pause(struct hr_agent *a, int pause)
{
    if (a->ssh)
        hr_ssh_link_pause(a, pause);
    else
        hr_local_link_pause(a, pause);
}

void hr_link_kill(struct hr_agent *a, int sig)
{
    if (a->ssh)
        hr_ssh_link_kill(a);
    else if (a->running)
        uv_process_kill(&a->proc, sig);
}

void hr_link_release(struct hr_agent *a)
{
    if (a->ssh)
        hr_ssh_link_release(a);
    else
        hr_local_link_release(a);
}
