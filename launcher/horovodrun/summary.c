/* The failure summary: the one line that names the failed rank. */
#include "launcher/horovodrun/summary.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"

/* A rank that exits with an error code is often only the echo of another
 * rank's death or a lost host (its collectives failed): a death by a
 * signal, or a lost host, reported this soon after it is named instead. */
#define CAUSE_WINDOW_MS 1000

const char *hr_summary_signame(int sig)
{
    static char buf[16];
    const char *abbrev = sigabbrev_np(sig);
    snprintf(buf, sizeof(buf), "SIG%s", abbrev ? abbrev : "?");
    return buf;
}

int hr_summary_is_cause(const struct hr_rank_state *ranks, int failed_rank,
                        uint64_t failed_at, int interrupt_sig, uint64_t now,
                        double kill_grace)
{
    if (failed_rank < 0 || interrupt_sig ||
        ranks[failed_rank].kind != HVD_EXIT_CODE)
        return 0;
    uint64_t since = now - failed_at;
    return since < CAUSE_WINDOW_MS && since < (uint64_t)(kill_grace * 1000);
}

int hr_summary_rank(const char *why, int r, const char *host, int local_rank,
                    uint8_t kind, int32_t code, const char *cmd)
{
    switch (kind) {
    case HVD_EXIT_SPAWN:
        hvd_log_error("%srank %d on %s: cannot execute '%s': %s", why, r, host,
                      cmd, strerror(code));
        return code == ENOENT ? HR_EXIT_NOTFOUND : HR_EXIT_NOEXEC;
    case HVD_EXIT_SIGNAL:
        hvd_log_error("%srank %d (host %s, local_rank %d) was killed by "
                      "signal %d (%s); the job was stopped",
                      why, r, host, local_rank, code, hr_summary_signame(code));
        return 128 + (code & 127);
    default:
        hvd_log_error("%srank %d (host %s, local_rank %d) exited with code %d;"
                      " the job was stopped",
                      why, r, host, local_rank, code);
        return code & 255;
    }
}
