/* The agents launch: one hvd-agent per host, and what it needs to start. */
#ifndef HR_LAUNCH_AGENTS_H
#define HR_LAUNCH_AGENTS_H

#include <stdint.h>
#include <uv.h>

#include "common/secret.h"
#include "launcher/horovodrun/rdv.h"
#include "launcher/link/link.h"

struct hr_gloo_store;

/* The agents launch's state (job->launch of hr_launch_agents). */
struct hr_agents {
    struct hr_agent *agents;
    int nagents;
    int agents_left; /* agents not ended */
    int remote;      /* some agents are remote */
    int started;     /* pre-flight passed, JOB sent */
    int preflight_failed;
    struct hr_rdv rdv;
    struct hr_gloo_store *gloo; /* Horovod's Gloo rendezvous, or NULL */
    int gloo_port;              /* its port; 0 with --no-gloo-rendezvous */
    char gloo_iface[64];        /* the rendezvous address's interface */
    uv_timer_t start_timer;
    uv_timer_t ping_timer;    /* keeps remote agents sure we are alive */
    uv_timer_t startup_timer; /* redraws the start-up progress line */
    int master_port;
    char cwd[4096]; /* where the ranks run, on every host */
    uint8_t secret[HVD_SECRET_LEN];
    char secret_hex[2 * HVD_SECRET_LEN + 1];
    int stdin_agent; /* agent that hosts rank 0, or -1 */
};

#endif
