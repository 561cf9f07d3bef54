/* Which host each rank is on, and which peers' addresses a rank needs:
 * the rendezvous server hands each rank only those (its ring's
 * neighbours and Bruck partners, and as a host's leader the leaders'),
 * so what it sends grows with N log N, not N squared. Both sides
 * compute the same sets from the same layout. */
#ifndef HVD_RDVLAYOUT_H
#define HVD_RDVLAYOUT_H

#include <stdint.h>

/* The most links a ring connects: the ring itself and Bruck's. */
#define HVD_RDV_RING_LINKS 16
/* The most peers a rank needs: both directions of both rings, and
 * itself. */
#define HVD_RDV_WANTED_MAX (4 * HVD_RDV_RING_LINKS + 1)
/* The largest job the rendezvous describes. */
#define HVD_RDV_SIZE_MAX (1u << 22)

/*
 * The layout on the wire, in rank order: runs of `repeat` hosts of
 * `count` ranks each. host < 0: new hosts, numbered after those seen so
 * far; host >= 0 (repeat 1): `count` more ranks of host `host`, seen
 * before. Every rank of a job of 8 ranks per host is one run.
 */
struct hvd_rdv_run {
    uint32_t count, repeat;
    int32_t host;
};

struct hvd_rdv_layout {
    int size, nhosts;
    int *host_of; /* each rank's host, by order of first appearance */
    int *first;   /* each host's lowest rank: its leader */
};

/* How many links a ring of size members connects: the ring itself, and
 * from 4 members Bruck's links to the members 2, 4, 8, ... ahead. */
int hvd_rdv_ring_links(int size);

/* From each rank's host name (the server). 0 or HVD_ENOMEM. */
int hvd_rdv_layout_from_hosts(struct hvd_rdv_layout *l, int size,
                              const char *const *hosts);
/* HVD_EPROTO unless the runs describe size ranks (size <=
 * HVD_RDV_SIZE_MAX) and name only hosts seen before; else 0 and how many
 * hosts they describe. */
int hvd_rdv_runs_check(uint32_t size, const struct hvd_rdv_run *runs,
                       uint32_t nruns, int *nhosts);
/* From the runs of a PEERS frame, checked as above. l is empty after a
 * failure (closing it is safe). */
int hvd_rdv_layout_from_runs(struct hvd_rdv_layout *l, uint32_t size,
                             const struct hvd_rdv_run *runs, uint32_t nruns);
/* The runs that describe l; *runs is new (free()). */
int hvd_rdv_layout_runs(const struct hvd_rdv_layout *l,
                        struct hvd_rdv_run **runs, uint32_t *nruns);
/* The ranks whose addresses rank needs, itself included, ascending, in
 * out (HVD_RDV_WANTED_MAX entries); returns how many. */
int hvd_rdv_layout_wanted(const struct hvd_rdv_layout *l, int rank, int *out);
void hvd_rdv_layout_close(struct hvd_rdv_layout *l);

#endif
