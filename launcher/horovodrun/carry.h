/* The rendezvous the agents carry (JOB's carry_rdv): each rank registers
 * with its agent on loopback, and the agent's channel carries the
 * connection to the rendezvous server as a stream of RDV frames. So
 * horovodrun holds one channel per agent it started itself, however many
 * ranks and hosts are under it. */
#ifndef HR_CARRY_H
#define HR_CARRY_H

#include "common/frame.h"
#include "launcher/horovodrun/rdv.h"
#include "launcher/link/link.h"

/* Agent a will carry its ranks' rendezvous to r (sent with its JOB). 0 or
 * HVD_ENOMEM. */
int hr_carry_new(struct hr_agent *a, struct hr_rdv *r);
/* An RDV_OPEN, RDV_DATA or RDV_CLOSE frame from a. 0, or HVD_EPROTO for
 * a damaged frame, an agent that carries nothing, a stream id out of
 * order or more streams than its ranks allow. */
int hr_carry_frame(struct hr_agent *a, const struct hvd_frame *f);
/* a ended: the connections it carried end, as closed sockets would. */
void hr_carry_end(struct hr_agent *a);
/* Frees what hr_carry_new made; NULL is a no-op. */
void hr_carry_free(struct hr_carry *c);

#endif
