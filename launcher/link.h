/* Links: how horovodrun reaches the agent of a host, a local child over
 * pipes or a remote one over SSH. The job controller only sees frames. */
#ifndef HR_LINK_H
#define HR_LINK_H

#include <stddef.h>
#include <stdint.h>

struct hr_agent;

/*
 * Starts the agent. Returns 0, or -1 with a->failure describing why; the
 * agent then counts as ended (hr_job_agent_ended is not called).
 */
int hr_link_start(struct hr_agent *a);
/* Queues a frame (ownership passes). With notify, hr_job_agent_sent is
 * called once it was written. */
void hr_link_send(struct hr_agent *a, uint8_t *frame, size_t len, int notify);
/*
 * Stops (pause 1) or resumes (0) taking frames from the agent, when the
 * terminal falls behind. Only the agent-to-horovodrun direction stops:
 * frames to the agent (PING, STOP, SIGNAL, STDIN) still go out.
 */
void hr_link_pause(struct hr_agent *a, int pause);
/* Ends the agent without asking it: a signal locally, a closed session
 * remotely (the agent sees its stdin close and stops its ranks). */
void hr_link_kill(struct hr_agent *a, int sig);
/* Frees what the link holds, once the agent ended. */
void hr_link_release(struct hr_agent *a);
/* The absolute path of the program name next to this horovodrun (such as
 * "hvd-agent"). Returns 0, or -1 when it does not fit in len. */
int hr_link_sibling_path(const char *name, char *out, size_t len);

/* Called by the links. */
void hr_job_agent_bytes(struct hr_agent *a, const char *buf, size_t n);
void hr_job_agent_ended(struct hr_agent *a);
void hr_job_agent_sent(struct hr_agent *a);

#endif
